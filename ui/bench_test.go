package ui_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/ui"
)

// Scale of BenchmarkPages: issue 20's "1,024 partitions and 100,000 dead
// letters", every partition parked with messages behind its head.
const (
	benchPartitions  = 1024
	benchBehind      = 20
	benchDeadLetters = 100_000
)

// BenchmarkPages renders every screen on PostgreSQL at the scale above and
// reports each page's server time (ms/op). It asserts no time: see
// BENCHMARKS.md, "Web UI pages at scale".
//
//	go test ./ui -run '^$' -bench Pages -benchtime 20x
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	db := dbtest.Postgres(b)
	prefix := dbtest.Prefix(b)
	b.Cleanup(func() { dropTables(b, db, prefix) })
	parkBad := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		if strings.HasPrefix(string(d.Payload), "bad") {
			return errors.New("cannot handle " + string(d.Payload))
		}
		return nil
	})
	ob, err := seqbox.New(db).TablePrefix(prefix).Migrate(true).Logger(slog.New(slog.DiscardHandler)).
		Queue("wide", benchPartitions, parkBad, processor.MaxAttempts(1), processor.OnFailure(processor.Park)).
		Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ob.Stop(context.Background()) })
	msgs := make([]outbox.Message, 0, benchPartitions*(benchBehind+1))
	for p := range benchPartitions {
		msgs = append(msgs, outbox.Message{Partition: p, PayloadType: "order", Payload: fmt.Appendf(nil, `bad {"partition":%d}`, p)})
		for i := range benchBehind {
			msgs = append(msgs, outbox.Message{Partition: p, PayloadType: "order",
				Payload: fmt.Appendf(nil, `{"partition":%d,"n":%d}`, p, i), Headers: map[string]string{"tenant": fmt.Sprint("t", p%8)}})
		}
	}
	for chunk := range slicesChunk(msgs, 1000) {
		if _, err := ob.EnqueueBatch(ctx, db, "wide", chunk); err != nil {
			b.Fatal(err)
		}
	}
	waitAllParked(b, ob)
	seedDeadLetters(b, db, prefix)

	h, err := ui.New(ob.Admin(), ui.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"queue", "/queues/wide"},
		{"queue-parked", "/queues/wide?state=parked"},
		{"partition", "/queues/wide/partitions/512"},
		{"deadletters", "/deadletters"},
		{"deadletters-next", "/deadletters?after=50000"},
		{"deadletters-partition", "/deadletters?queue=wide&partition=512&status=any"},
		{"deadletters-header", "/deadletters?header=tenant%3Dt3"},
		{"deadletters-error", "/deadletters?error=refused"},
		{"deadletter", "/deadletters/50000"},
		{"confirm-partition", "/deadletters/confirm?action=replay&queue=wide&partition=512"},
		{"confirm-all", "/deadletters/confirm?action=replay"},
		{"purge-preview", "/purge?queue=wide&header=tenant%3Dt3"},
	}
	// What the pages' time is made of: the admin reads they make.
	admin := ob.Admin()
	for name, read := range map[string]func() error{
		"read-stats":    func() error { _, err := admin.Stats(ctx); return err },
		"read-failing":  func() error { _, err := admin.Partitions().Failing(ctx, ""); return err },
		"read-messages": func() error { _, err := admin.Partitions().Messages(ctx, "wide", 512, 22); return err },
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
		})
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				r := httptest.NewRequest("GET", p.path, nil)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, w.Code, w.Body.String())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

func slicesChunk[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

func waitAllParked(b *testing.B, ob *seqbox.Outbox) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		parked, err := ob.Admin().Partitions().Parked(context.Background(), "wide")
		if err != nil {
			b.Fatal(err)
		}
		if len(parked) == benchPartitions {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d partitions parked", len(parked), benchPartitions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seedDeadLetters writes the dead letters in one statement: spread over the
// partitions, a tenth per status other than pending, errors that vary.
func seedDeadLetters(b *testing.B, db *bun.DB, prefix string) {
	_, err := db.NewRaw(`INSERT INTO ? (partition_id, seq, message_id, payload_type, payload, headers, created_at, failed_at,
	last_error, attempts, status)
SELECT p.id, g.n, decode(md5(g.n::text), 'hex'), 'order', convert_to('{"n":' || g.n || '}', 'UTF8'),
	'{"tenant":"t' || (g.n % 8) || '"}', now() - interval '1 hour', now() - (g.n || ' seconds')::interval,
	CASE g.n % 3 WHEN 0 THEN 'db timeout after 5s' WHEN 1 THEN 'connection refused' ELSE 'invalid order ' || g.n END,
	3, CASE g.n % 10 WHEN 1 THEN 'resolved' WHEN 2 THEN 'discarded' ELSE 'pending' END
FROM generate_series(1, ?) AS g(n)
JOIN ? p ON p.partition_no = g.n % ? AND p.queue = 'wide'`,
		bun.Ident(prefix+"dead_letters"), benchDeadLetters, bun.Ident(prefix+"partitions"), benchPartitions).Exec(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.NewRaw("ANALYZE ?", bun.Ident(prefix+"dead_letters")).Exec(context.Background()); err != nil {
		b.Fatal(err)
	}
}

func dropTables(b *testing.B, db *bun.DB, prefix string) {
	var names []string
	if err := db.NewRaw("SELECT tablename FROM pg_tables WHERE tablename LIKE ?", prefix+"%").Scan(context.Background(), &names); err != nil {
		b.Log(err)
		return
	}
	for _, n := range names {
		if _, err := db.NewRaw("DROP TABLE IF EXISTS ? CASCADE", bun.Ident(n)).Exec(context.Background()); err != nil {
			b.Log(err)
		}
	}
}
