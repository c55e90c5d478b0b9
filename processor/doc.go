// Package processor holds what an application writes to consume a queue:
// handlers in four shapes (Leased, LeasedBatch, Transactional,
// TransactionalBatch, and the typed JSON and Decoded forms), the Delivery
// and Batch they receive, Reject to dead-letter a message, middleware
// around every handler call (Use), and the queue options given to
// seqbox's Builder.Queue (BatchSize, MaxAttempts, Retry, Lease,
// HandlerTimeout, OnFailure, DedupWindow).
//
// A handler returns nil to ack, an error to have the message retried with
// backoff, or Reject(err) to send it to dead letters and move on. Leased
// handlers run outside any transaction (at-least-once); transactional ones
// run inside the transaction that acks, so their database writes happen
// exactly once.
package processor
