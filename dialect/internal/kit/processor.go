package kit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// ProcessorSQL is the statements every dialect's processor operations
// share in shape.
type ProcessorSQL struct {
	// ReadyList reads which of the partitions ?pids (a list) have
	// sequenced, unacked rows, no live lease and no retry pending.
	ReadyList *Stmt
	// Lock row-locks partition ?pid's processor row (skipping it when
	// another transaction holds it) when it is not parked, not backing off
	// and has work: processed_seq, attempts. Prepared.
	Lock *Stmt
	// OutgoingList reads partition ?pid's batch after seq ?after, up to
	// ?limit rows, joined with bodies, in seq order. Prepared.
	OutgoingList *Stmt
	// Update records an outcome of partition ?pid: ?seq ?attempts
	// ?last_error, a retry in ?retry_us microseconds when > 0, parked when
	// ?park = 1; it releases the lease. UpdateGuarded is Update only while
	// ?owner holds the lease. Prepared.
	Update        *Stmt
	UpdateGuarded *Stmt
	DeadLetters   DeadLetterWriteSQL
}

// DeadLetterWriteSQL writes dead letters in an outcome's transaction.
type DeadLetterWriteSQL struct {
	// Insert inserts ?rows (?pid ?seq ?message_id ?key ?payload_type
	// ?payload ?headers ?created_at ?last_error ?attempts ?status, failed
	// now), returning id, partition_id, seq where InsertReturns.
	Insert        *Stmt
	InsertReturns bool
	// Written reads back, where the INSERT returns nothing, the letters of
	// partitions ?pids (a list) from id ?first on: id, partition_id, seq.
	Written *Stmt `kit:"optional"`
	// Resolve marks the letters whose replays ?ids (a list) were just
	// acked: status ?replayed becomes ?resolved, completed now.
	Resolve *Stmt
}

type stateRow struct {
	ProcessedSeq int64 `bun:"processed_seq"`
	Attempts     int   `bun:"attempts"`
}

// Ready returns partitions with work and no lease or backoff.
func (s *ProcessorSQL) Ready(ctx context.Context, r *Runner, p *dialect.ProcessorReadyListParams) ([]int64, error) {
	if len(p.PartitionIDs) == 0 {
		return nil, nil
	}
	return ReadIDs(ctx, r, s.ReadyList, Args{"pids": IDs(p.PartitionIDs)})
}

// LockRow row-locks the processor row inside p.Conn (transactional mode).
func (s *ProcessorSQL) LockRow(ctx context.Context, r *Runner, p *dialect.ProcessorLockParams) (dialect.ProcessorLockResult, error) {
	var rows []stateRow
	if err := r.Query(ctx, p.Conn, s.Lock, Args{"pid": p.PartitionID}, &rows); err != nil {
		return dialect.ProcessorLockResult{}, err
	}
	if len(rows) == 0 {
		return dialect.ProcessorLockResult{}, nil
	}
	return dialect.ProcessorLockResult{Locked: true, State: dialect.ProcessorState{ProcessedSeq: rows[0].ProcessedSeq, Attempts: rows[0].Attempts}}, nil
}

// OutgoingRow is one row of a batch read (outgoing joined with body).
type OutgoingRow struct {
	Seq         int64     `bun:"seq"`
	BodyID      []byte    `bun:"body_id"`
	Purged      int       `bun:"purged"`
	Key         []byte    `bun:"msg_key"`
	PayloadType string    `bun:"payload_type"`
	Payload     []byte    `bun:"payload"`
	Headers     *string   `bun:"headers"`
	CreatedAt   time.Time `bun:"created_at"`
}

// Message converts a batch row.
func (r *OutgoingRow) Message() dialect.OutgoingMessage {
	m := dialect.OutgoingMessage{Seq: r.Seq, ID: toID(r.BodyID), Purged: r.Purged != 0, Key: string(r.Key), PayloadType: r.PayloadType, Payload: r.Payload, CreatedAt: r.CreatedAt}
	if r.Headers != nil {
		m.Headers = []byte(*r.Headers)
	}
	return m
}

// Outgoing reads the next batch joined with bodies, in seq order.
func (s *ProcessorSQL) Outgoing(ctx context.Context, r *Runner, p *dialect.OutgoingListParams) ([]dialect.OutgoingMessage, error) {
	var rows []OutgoingRow
	if err := r.Query(ctx, p.Conn, s.OutgoingList, Args{"pid": p.PartitionID, "after": p.AfterSeq, "limit": p.Limit}, &rows); err != nil {
		return nil, err
	}
	out := make([]dialect.OutgoingMessage, len(rows))
	for i := range rows {
		out[i] = rows[i].Message()
	}
	return out, nil
}

// UpdateArgs are the values of an outcome: ?seq ?attempts ?last_error
// ?retry_us ?park ?pid, and ?owner when guarded.
func UpdateArgs(p *dialect.ProcessorUpdateParams, guarded bool) Args {
	a := Args{"seq": p.ProcessedSeq, "attempts": p.Attempts, "last_error": LastErrorArg(p.LastError),
		"retry_us": p.RetryAfter.Microseconds(), "pid": p.PartitionID, "park": Bool(p.Park)}
	if guarded {
		a["owner"] = p.Owner
	}
	return a
}

// Record records a batch outcome on p.Conn; see dialect.Dialect's
// ProcessorUpdate.
func (s *ProcessorSQL) Record(ctx context.Context, r *Runner, p *dialect.ProcessorUpdateParams) error {
	stmt, guarded := s.Update, p.Owner != ""
	if guarded {
		stmt = s.UpdateGuarded
	}
	n, err := r.Affected(ctx, p.Conn, stmt, UpdateArgs(p, guarded))
	if err != nil {
		return err
	}
	if guarded && n == 0 {
		return dialect.ErrLeaseLost
	}
	if len(p.DeadLetters) > 0 {
		if err := s.DeadLetters.insert(ctx, r, p.Conn, p.DeadLetters); err != nil {
			return err
		}
	}
	if len(p.ResolveReplays) > 0 {
		return s.DeadLetters.resolve(ctx, r, p.Conn, p.ResolveReplays)
	}
	return nil
}

// OwnTransaction refuses an outcome that names a connection for an
// operation that runs in a transaction of its own (ProcessorAck, the
// ack-and-lease ones): the outcome would not be written where its caller
// thinks.
func OwnTransaction(op string, p *dialect.ProcessorUpdateParams) error {
	if p == nil {
		return fmt.Errorf("seqbox: %s: no outcome", op)
	}
	if p.Conn != nil {
		return fmt.Errorf("seqbox: %s runs in a transaction of its own: the outcome's Conn must be nil", op)
	}
	return nil
}

// RecordInTx records a leased batch's outcome in its own transaction.
func (s *ProcessorSQL) RecordInTx(ctx context.Context, r *Runner, p *dialect.ProcessorUpdateParams) error {
	if err := OwnTransaction("ProcessorAck", p); err != nil {
		return err
	}
	return r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		u := *p
		u.Conn = tx
		return s.Record(ctx, r, &u)
	})
}

// LeaseFunc takes a lease on conn, in a transaction where the dialect
// needs one, and returns the state before it counted its attempt.
type LeaseFunc func(ctx context.Context, conn bun.IConn, p *dialect.ProcessorLeaseParams) (dialect.ProcessorState, bool, error)

// LeaseArgs are the values of a lease: ?owner ?lease_us ?limit ?pid.
func LeaseArgs(p *dialect.ProcessorLeaseParams) Args {
	return Args{"owner": p.Owner, "lease_us": p.Duration.Microseconds(), "pid": p.PartitionID, "limit": p.Limit}
}

// LeaseReturning takes a lease with stmt, an UPDATE … RETURNING
// processed_seq, attempts (LeaseArgs).
func LeaseReturning(r *Runner, stmt *Stmt) LeaseFunc {
	return func(ctx context.Context, conn bun.IConn, p *dialect.ProcessorLeaseParams) (dialect.ProcessorState, bool, error) {
		var rows []stateRow
		if err := r.Query(ctx, conn, stmt, LeaseArgs(p), &rows); err != nil {
			return dialect.ProcessorState{}, false, err
		}
		if len(rows) == 0 {
			return dialect.ProcessorState{}, false, nil
		}
		return dialect.ProcessorState{ProcessedSeq: rows[0].ProcessedSeq, Attempts: rows[0].Attempts - 1}, true, nil
	}
}

// LeaseThenRead takes a lease with the UPDATE lease (LeaseArgs), then
// reads the row it updated with state (?pid ?owner): for a database
// without UPDATE … RETURNING, inside a transaction.
func LeaseThenRead(r *Runner, lease, state *Stmt) LeaseFunc {
	return func(ctx context.Context, tx bun.IConn, p *dialect.ProcessorLeaseParams) (dialect.ProcessorState, bool, error) {
		n, err := r.Affected(ctx, tx, lease, LeaseArgs(p))
		if err != nil || n == 0 {
			return dialect.ProcessorState{}, false, err
		}
		var rows []stateRow
		if err := r.Query(ctx, tx, state, Args{"pid": p.PartitionID, "owner": p.Owner}, &rows); err != nil {
			return dialect.ProcessorState{}, false, err
		}
		if len(rows) == 0 {
			return dialect.ProcessorState{}, false, fmt.Errorf("lease of partition %d taken but not found", p.PartitionID)
		}
		return dialect.ProcessorState{ProcessedSeq: rows[0].ProcessedSeq, Attempts: rows[0].Attempts - 1}, true, nil
	}
}

// LeaseRead reads the batch of a lease just taken, on conn.
func (s *ProcessorSQL) LeaseRead(ctx context.Context, r *Runner, conn bun.IConn, p *dialect.ProcessorLeaseParams, state dialect.ProcessorState) (dialect.ProcessorLeaseResult, error) {
	msgs, err := s.Outgoing(ctx, r, &dialect.OutgoingListParams{Conn: conn, PartitionID: p.PartitionID, AfterSeq: state.ProcessedSeq, Limit: p.Limit})
	if err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	return dialect.ProcessorLeaseResult{Leased: true, State: state, Messages: msgs}, nil
}

// AckLeaseInTx records a clean ack, takes the next lease with lease and
// reads its batch, all in one transaction: one commit instead of two while
// a partition has work. When nothing is left, the lease stays released.
func (s *ProcessorSQL) AckLeaseInTx(ctx context.Context, r *Runner, p *dialect.ProcessorAckLeaseParams, lease LeaseFunc) (dialect.ProcessorLeaseResult, error) {
	if err := OwnTransaction("ProcessorAckLease", p.Ack); err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	var res dialect.ProcessorLeaseResult
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res = dialect.ProcessorLeaseResult{}
		ack := *p.Ack
		ack.Conn = tx
		// The ack released the lease; the lease statement takes it again
		// under its usual conditions (work waiting, no backoff).
		if err := s.Record(ctx, r, &ack); err != nil {
			return err
		}
		state, ok, err := lease(ctx, tx, p.Next)
		if err != nil || !ok {
			return err
		}
		res, err = s.LeaseRead(ctx, r, tx, p.Next, state)
		return err
	})
	if err != nil {
		return dialect.ProcessorLeaseResult{}, err
	}
	return res, nil
}

// insert writes self-contained dead-letter copies on conn and sets each
// one's ID: an operator acts on a letter by its id, and the processor
// logs it.
func (s *DeadLetterWriteSQL) insert(ctx context.Context, r *Runner, conn bun.IConn, dls []dialect.DeadLetter) error {
	rows := make([]Args, len(dls))
	for i := range dls {
		d := &dls[i]
		rows[i] = Args{"pid": d.PartitionID, "seq": d.Seq, "message_id": d.MessageID[:], "key": KeyArg(d.Key),
			"payload_type": d.PayloadType, "payload": d.Payload, "headers": HeadersArg(d.Headers), "created_at": d.CreatedAt.UTC(),
			"last_error": dialect.ErrorText(d.LastError), "attempts": d.Attempts, "status": dialect.DeadLetterPending}
	}
	var written []struct {
		ID          int64 `bun:"id"`
		PartitionID int64 `bun:"partition_id"`
		Seq         int64 `bun:"seq"`
	}
	if s.InsertReturns {
		if err := r.Query(ctx, conn, s.Insert, Args{"rows": rows}, &written); err != nil {
			return err
		}
	} else {
		res, err := r.Exec(ctx, conn, s.Insert, Args{"rows": rows})
		if err != nil {
			return err
		}
		first, err := res.LastInsertId() // the first id of a multi-row INSERT
		if err != nil {
			return r.Wrap(err)
		}
		pids := make([]int64, 0, len(dls))
		for _, d := range dls {
			if !slices.Contains(pids, d.PartitionID) {
				pids = append(pids, d.PartitionID)
			}
		}
		// Their processor rows are locked by the transaction, so no other
		// letter of theirs can appear meanwhile; ids need not be consecutive.
		if err := r.Query(ctx, conn, s.Written, Args{"pids": IDs(pids), "first": first}, &written); err != nil {
			return err
		}
	}
	// A message has one letter per write: (partition, seq) names it; read
	// in id order, the newest row wins.
	ids := make(map[[2]int64]int64, len(written))
	for _, w := range written {
		ids[[2]int64{w.PartitionID, w.Seq}] = w.ID
	}
	for i := range dls {
		id, ok := ids[[2]int64{dls[i].PartitionID, dls[i].Seq}]
		if !ok {
			return fmt.Errorf("seqbox: dead letter of partition %d seq %d not found after its insert", dls[i].PartitionID, dls[i].Seq)
		}
		dls[i].ID = id
	}
	return nil
}

// resolve marks the letters whose replays were just acked resolved, on
// conn (the ack's transaction).
func (s *DeadLetterWriteSQL) resolve(ctx context.Context, r *Runner, conn bun.IConn, ids []dialect.MessageID) error {
	raw := make([][]byte, len(ids))
	for i := range ids {
		raw[i] = ids[i][:]
	}
	_, err := r.Exec(ctx, conn, s.Resolve, Args{"resolved": dialect.DeadLetterResolved, "replayed": dialect.DeadLetterReplayed, "ids": bun.List(raw)})
	return err
}
