package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// The fault tests (crash.go, faults.go) check delivery against an
// application ledger: each committed message has a ledger row written in
// the transaction that enqueued it, so the ledger is the truth of what
// committed even when the producer never learnt whether its commit
// succeeded. Every delivery is a row in the delivered table. Each message
// goes to a leased queue (duplicates allowed) and a transactional one
// (its delivered row commits with the ack: no duplicates).
const (
	ledgerLeased     = "ledger_leased"
	ledgerTx         = "ledger_tx"
	ledgerPartitions = 4
	ledgerKeys       = 16
	ledgerPayload    = "ledger.entry"
)

var ledgerQueueNames = []string{ledgerLeased, ledgerTx}

// ledgerExactlyOnce says which queues must show no duplicate delivery.
var ledgerExactlyOnce = map[string]bool{ledgerLeased: false, ledgerTx: true}

func ledgerTable(prefix string) bun.Ident    { return bun.Ident(prefix + "ledger") }
func deliveredTable(prefix string) bun.Ident { return bun.Ident(prefix + "delivered") }

// createLedgerTables creates both tables and drops them at cleanup. The
// unique (queue, k, n) stops two producers (a killed one's late commit and
// its successor) from committing the same counter for a key.
func createLedgerTables(e *Env) {
	ddl := []struct {
		table bun.Ident
		cols  string
	}{
		{ledgerTable(e.Prefix), "message_id VARCHAR(36) NOT NULL PRIMARY KEY, queue VARCHAR(16) NOT NULL, k VARCHAR(16) NOT NULL, n INTEGER NOT NULL, UNIQUE (queue, k, n)"},
		{deliveredTable(e.Prefix), "id " + autoIncrementKey(e) + ", message_id VARCHAR(36) NOT NULL, queue VARCHAR(16) NOT NULL, part INTEGER NOT NULL, seq BIGINT NOT NULL, payload VARCHAR(64) NOT NULL"},
	}
	for _, t := range ddl {
		_, err := e.DB.NewRaw("CREATE TABLE ? ("+t.cols+")", t.table).Exec(e.Ctx)
		require.NoError(e.T, err)
	}
	_, err := e.DB.NewRaw("CREATE INDEX ? ON ? (message_id)", bun.Ident(e.Prefix+"delivered_msg"), deliveredTable(e.Prefix)).Exec(e.Ctx)
	require.NoError(e.T, err)
	e.T.Cleanup(func() {
		if os.Getenv("SEQBOX_KEEP_TABLES") != "" {
			return
		}
		for _, t := range []bun.Ident{ledgerTable(e.Prefix), deliveredTable(e.Prefix)} {
			_, _ = e.DB.NewRaw("DROP TABLE IF EXISTS ?", t).Exec(context.Background())
		}
	})
}

// autoIncrementKey is the delivered table's id: its order is the order
// handlers wrote their rows in.
func autoIncrementKey(e *Env) string {
	switch e.D.Name() {
	case dialect.Postgres:
		return "BIGSERIAL PRIMARY KEY"
	case dialect.MySQL:
		return "BIGINT AUTO_INCREMENT PRIMARY KEY"
	case dialect.SQLite:
		return "INTEGER PRIMARY KEY AUTOINCREMENT"
	default:
		e.T.Fatalf("no auto-increment column for dialect %q", e.D.Name())
		return ""
	}
}

// ledgerText is a message's payload: its key and per-key counter, or a
// marker for a transaction that rolls back on purpose.
func ledgerText(k string, n int, rollback bool) string {
	if rollback {
		return fmt.Sprintf("rollback/%s/%d", k, n)
	}
	return fmt.Sprintf("%s/%d", k, n)
}

// ledgerQueues registers both queues on b: consuming (each delivery
// recorded on db, or in the ack transaction) or producer-only.
func ledgerQueues(b *seqbox.Builder, db *bun.DB, prefix string, consume bool) *seqbox.Builder {
	if !consume {
		return b.ProducerOnly().Queue(ledgerLeased, ledgerPartitions, nil).Queue(ledgerTx, ledgerPartitions, nil)
	}
	// Short leases and retries so a killed consumer's batch comes back
	// quickly; never dead-letter, as every kill counts an attempt.
	opts := []processor.QueueOption{processor.Retry(10*time.Millisecond, 200*time.Millisecond),
		processor.MaxAttempts(processor.MaxAttemptsNever), processor.BatchSize(20)}
	leased := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		return recordDelivery(ctx, db, prefix, d)
	})
	tx := processor.Transactional(func(ctx context.Context, tx bun.Tx, d processor.Delivery) error {
		return recordDelivery(ctx, tx, prefix, d)
	})
	return b.Queue(ledgerLeased, ledgerPartitions, leased, append(opts, processor.Lease(time.Second, 200*time.Millisecond))...).
		Queue(ledgerTx, ledgerPartitions, tx, opts...)
}

func recordDelivery(ctx context.Context, db bun.IDB, prefix string, d processor.Delivery) error {
	_, err := db.NewRaw("INSERT INTO ? (message_id, queue, part, seq, payload) VALUES (?, ?, ?, ?, ?)",
		deliveredTable(prefix), d.ID.String(), d.Queue, d.Partition, d.Seq, string(d.Payload)).Exec(ctx)
	return err
}

// ledgerProducer commits one transaction at a time, each 1..3 messages of
// one of its keys (each on both queues, with its ledger rows); one in five
// rolls back on purpose. One producer per key at a time, in sequence, so
// a key's counter order is its commit order, which delivery must keep.
type ledgerProducer struct {
	ob     *Outbox
	db     *bun.DB
	prefix string
	keys   []string
	last   map[string]int // last committed n per key
	stale  bool           // an error left last unknown: read it from the ledger
	rng    *rand.Rand

	committed, rolledBack, failed int // transactions
	messages                      int // committed with no error

	// acked are the ids of the messages whose transaction's commit
	// returned nil: what the application was told is committed.
	acked []string

	// sent, when set, counts the messages committed (each on every queue),
	// for a case that paces its producers by the consumer's progress; held,
	// when set, says the consumer is behind: run waits instead of
	// committing, until it has caught up.
	sent *atomic.Int64
	held func() bool
}

// newLedgerProducer owns the keys k with k % producers == slot.
func newLedgerProducer(ob *Outbox, db *bun.DB, prefix string, slot, producers int, seed uint64) *ledgerProducer {
	p := &ledgerProducer{ob: ob, db: db, prefix: prefix, stale: true, rng: rand.New(rand.NewPCG(seed, uint64(slot)))}
	for i := slot; i < ledgerKeys; i += producers {
		p.keys = append(p.keys, fmt.Sprintf("k%02d", i))
	}
	return p
}

// run commits until ctx ends, tolerating its own errors.
func (p *ledgerProducer) run(ctx context.Context, pause time.Duration) {
	for ctx.Err() == nil {
		if p.held != nil && p.held() {
			time.Sleep(pause)
			continue
		}
		wait := pause
		if p.step(ctx) != nil {
			wait += 20 * time.Millisecond // e.g. a killed connection: not in a busy loop
		}
		time.Sleep(wait)
	}
}

func (p *ledgerProducer) step(ctx context.Context) error {
	if p.stale {
		if err := p.readCounters(ctx); err != nil {
			p.failed++
			return err
		}
		p.stale = false
	}
	k := p.keys[p.rng.IntN(len(p.keys))]
	m := 1 + p.rng.IntN(3)
	rollback := p.rng.IntN(5) == 0
	var ids []string
	err := p.ob.Transaction(ctx, func(ctx context.Context, tx bun.Tx) error {
		ids = ids[:0]
		for n := p.last[k] + 1; n <= p.last[k]+m; n++ {
			for _, q := range ledgerQueueNames {
				msg := outbox.Message{Key: k, PayloadType: ledgerPayload, Payload: []byte(ledgerText(k, n, rollback))}
				id, err := p.ob.Enqueue(ctx, tx, q, msg)
				if err != nil {
					return err
				}
				ids = append(ids, id.String())
				if _, err := tx.NewRaw("INSERT INTO ? (message_id, queue, k, n) VALUES (?, ?, ?, ?)",
					ledgerTable(p.prefix), id.String(), q, k, n).Exec(ctx); err != nil {
					return err
				}
			}
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	switch {
	case err == nil:
		p.last[k] += m
		p.committed++
		p.messages += m
		p.acked = append(p.acked, ids...)
		if p.sent != nil {
			p.sent.Add(int64(len(ids)))
		}
	case errors.Is(err, errRollback):
		p.rolledBack++
		return nil
	default:
		// The commit may have happened (the connection died after COMMIT
		// was sent) or not: the ledger knows.
		p.stale = true
		p.failed++
	}
	return err
}

func (p *ledgerProducer) readCounters(ctx context.Context) error {
	var rows []struct {
		K string `bun:"k"`
		N int    `bun:"n"`
	}
	if err := p.db.NewRaw("SELECT k, MAX(n) AS n FROM ? WHERE queue = ? AND k IN (?) GROUP BY k",
		ledgerTable(p.prefix), ledgerLeased, bun.List(p.keys)).Scan(ctx, &rows); err != nil {
		return err
	}
	p.last = map[string]int{}
	for _, r := range rows {
		p.last[r.K] = r.N
	}
	return nil
}

// drainLedger waits (a failure bound) until every ledger message has been
// delivered on ob and every delivery acked, so nothing is still in flight
// when the tables are checked.
func drainLedger(e *Env, ob *Outbox) {
	e.T.Helper()
	e.Eventually("every ledger message delivered", func() bool {
		var n int
		err := e.DB.NewRaw("SELECT COUNT(*) FROM ? l WHERE NOT EXISTS (SELECT 1 FROM ? d WHERE d.message_id = l.message_id)",
			ledgerTable(e.Prefix), deliveredTable(e.Prefix)).Scan(e.Ctx, &n)
		return err == nil && n == 0
	})
	e.Eventually("every delivery acked", func() bool {
		st, err := ob.Stats(e.Ctx)
		if err != nil {
			return false
		}
		for _, p := range st.Partitions {
			if p.Incoming > 0 || p.Unprocessed > 0 {
				return false
			}
		}
		return true
	})
}

type ledgerRow struct {
	MessageID string `bun:"message_id"`
	Queue     string `bun:"queue"`
	K         string `bun:"k"`
	N         int    `bun:"n"`
}

type deliveryRow struct {
	ID        int64  `bun:"id"`
	MessageID string `bun:"message_id"`
	Queue     string `bun:"queue"`
	Part      int    `bun:"part"`
	Seq       int64  `bun:"seq"`
	Payload   string `bun:"payload"`
}

// verifyLedger checks the delivered table against the ledger (see
// checkLedger) and that nothing was dead-lettered.
func verifyLedger(e *Env) {
	e.T.Helper()
	var ledger []ledgerRow
	var delivered []deliveryRow
	require.NoError(e.T, e.DB.NewRaw("SELECT message_id, queue, k, n FROM ?", ledgerTable(e.Prefix)).Scan(e.Ctx, &ledger))
	require.NoError(e.T, e.DB.NewRaw("SELECT id, message_id, queue, part, seq, payload FROM ?",
		deliveredTable(e.Prefix)).Scan(e.Ctx, &delivered))
	require.NotEmpty(e.T, ledger, "nothing committed: the test exercised nothing")
	problems := checkLedger(ledger, delivered)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
	}
	if len(problems) > 0 {
		e.T.Fatalf("delivery does not match the ledger:\n%s", strings.Join(problems, "\n"))
	}
	require.Zero(e.T, e.Count("dead_letters"), "nothing may be dead-lettered")
	e.T.Logf("ledger: %d messages committed, %d deliveries (%d redelivered)", len(ledger), len(delivered), len(delivered)-len(ledger))
}

// checkLedger returns every way delivered departs from ledger: a ledger
// message never delivered (lost), a delivery not in the ledger (rolled
// back), a payload or partition not the enqueued one, a message under two
// seqs or a seq carrying two messages, a gap in a partition's seqs, a
// handler seeing a seq before its predecessor, a key's counters out of
// order along the seqs, or a transactional message delivered twice.
func checkLedger(ledger []ledgerRow, delivered []deliveryRow) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	type queuePart struct {
		queue string
		part  int
	}
	byID := make(map[string]ledgerRow, len(ledger))
	for _, l := range ledger {
		byID[l.MessageID] = l
	}
	times, seqOf := map[string]int{}, map[string]int64{}
	idAt, maxSeen := map[queuePart]map[int64]string{}, map[queuePart]int64{}
	rows := append([]deliveryRow(nil), delivered...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID }) // the order handlers ran in
	for _, d := range rows {
		at := queuePart{d.Queue, d.Part}
		l, ok := byID[d.MessageID]
		if !ok {
			report("%s/%d seq %d: delivered %s (payload %q), which is not in the ledger: rolled back or never enqueued",
				d.Queue, d.Part, d.Seq, d.MessageID, d.Payload)
			continue
		}
		if d.Queue != l.Queue || d.Payload != ledgerText(l.K, l.N, false) || d.Part != outbox.PartitionForKey(l.K, ledgerPartitions) {
			report("%s: delivered on %s/%d with payload %q, enqueued on %s with key %s n %d", d.MessageID, d.Queue, d.Part, d.Payload, l.Queue, l.K, l.N)
		}
		if s, ok := seqOf[d.MessageID]; ok && s != d.Seq {
			report("%s delivered as seq %d and seq %d", d.MessageID, s, d.Seq)
		}
		seqOf[d.MessageID] = d.Seq
		if idAt[at] == nil {
			idAt[at] = map[int64]string{}
		}
		if other, ok := idAt[at][d.Seq]; ok && other != d.MessageID {
			report("%s/%d seq %d carried both %s and %s", d.Queue, d.Part, d.Seq, other, d.MessageID)
		}
		idAt[at][d.Seq] = d.MessageID
		if d.Seq > maxSeen[at]+1 {
			report("%s/%d: the handler saw seq %d before any delivery of seq %d", d.Queue, d.Part, d.Seq, maxSeen[at]+1)
		}
		maxSeen[at] = max(maxSeen[at], d.Seq)
		times[d.MessageID]++
	}
	for _, l := range ledger {
		switch n := times[l.MessageID]; {
		case n == 0:
			report("lost: %s (%s key %s n %d) committed but never delivered", l.MessageID, l.Queue, l.K, l.N)
		case n > 1 && ledgerExactlyOnce[l.Queue]:
			report("%s (%s key %s n %d) delivered %d times in transactional mode", l.MessageID, l.Queue, l.K, l.N, n)
		}
	}
	for at, ids := range idAt {
		last := map[string]int{}
		for s := int64(1); s <= maxSeen[at]; s++ {
			id, ok := ids[s]
			if !ok {
				report("%s/%d: gap: seq %d never delivered", at.queue, at.part, s)
				continue
			}
			if l := byID[id]; l.N > last[l.K] {
				last[l.K] = l.N
			} else {
				report("%s/%d: key %s n %d at seq %d after n %d: reordered", at.queue, at.part, l.K, l.N, s, last[l.K])
			}
		}
	}
	return problems
}
