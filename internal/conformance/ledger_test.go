package conformance

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/outbox"
)

// TestCheckLedgerCatches proves the fault tests' check fails on each kind
// of damage, and accepts leased duplicates.
func TestCheckLedgerCatches(t *testing.T) {
	var keys []string // two keys sharing a partition, so their order interleaves
	for i := 0; len(keys) < 2; i++ {
		if k := fmt.Sprintf("k%02d", i); outbox.PartitionForKey(k, ledgerPartitions) == outbox.PartitionForKey("k00", ledgerPartitions) {
			keys = append(keys, k)
		}
	}
	a, b := keys[0], keys[1]
	part := outbox.PartitionForKey(a, ledgerPartitions)
	good := func() ([]ledgerRow, []deliveryRow) {
		var ledger []ledgerRow
		var delivered []deliveryRow
		for _, q := range ledgerQueueNames {
			for i, m := range []struct {
				k string
				n int
			}{{a, 1}, {b, 1}, {a, 2}, {b, 2}, {a, 3}} { // the commit order
				id := fmt.Sprintf("%s-%s-%d", q, m.k, m.n)
				ledger = append(ledger, ledgerRow{MessageID: id, Queue: q, K: m.k, N: m.n})
				delivered = append(delivered, deliveryRow{ID: int64(len(delivered) + 1), MessageID: id, Queue: q,
					Part: part, Seq: int64(i + 1), Payload: ledgerText(m.k, m.n, false)})
			}
		}
		return ledger, delivered
	}
	ledger, delivered := good()
	require.Empty(t, checkLedger(ledger, delivered))

	for _, c := range []struct {
		name   string
		damage func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow)
		want   string // "" = no problem
	}{
		{"leased duplicate is allowed", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			dup := d[2]
			dup.ID = 100
			return l, append(d, dup)
		}, ""},
		{"lost", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) { return l, d[:len(d)-1] }, "lost"},
		{"rolled back delivered", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			return l, append(d, deliveryRow{ID: 100, MessageID: "rb", Queue: ledgerLeased, Part: part, Seq: 6, Payload: ledgerText(a, 4, true)})
		}, "not in the ledger"},
		{"transactional duplicate", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			dup := d[len(d)-1]
			dup.ID = 100
			return l, append(d, dup)
		}, "delivered 2 times in transactional mode"},
		{"reordered", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			d[0].MessageID, d[2].MessageID = d[2].MessageID, d[0].MessageID
			d[0].Payload, d[2].Payload = d[2].Payload, d[0].Payload
			return l, d
		}, "reordered"},
		{"gap", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) { d[4].Seq = 6; return l, d }, "gap: seq 5"},
		{"handler skipped ahead", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			d[1].ID, d[2].ID = d[2].ID, d[1].ID
			return l, d
		}, "saw seq 3 before any delivery of seq 2"},
		{"one seq, two messages", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			return l, append(d, deliveryRow{ID: 100, MessageID: d[1].MessageID, Queue: ledgerLeased, Part: part, Seq: 1, Payload: d[1].Payload})
		}, "carried both"},
		{"wrong payload", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) { d[3].Payload = "x"; return l, d }, "with payload \"x\""},
		{"wrong partition", func(l []ledgerRow, d []deliveryRow) ([]ledgerRow, []deliveryRow) {
			d[3].Part = part + 1
			return l, d
		}, fmt.Sprintf("delivered on %s/%d", ledgerLeased, part+1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			problems := checkLedger(c.damage(good()))
			if c.want == "" {
				require.Empty(t, problems)
				return
			}
			require.NotEmpty(t, problems)
			require.Contains(t, strings.Join(problems, "\n"), c.want)
		})
	}
}
