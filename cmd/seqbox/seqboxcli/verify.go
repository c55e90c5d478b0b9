package seqboxcli

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seqbox/seqbox/outbox"
)

// sent is what a producer enqueued in one message.
type sent struct {
	queue    string
	key      string
	producer int
	counter  int64 // producer-local, increasing in enqueue order
}

// payload encodes a message's origin, so the handler can report it and the
// checks need nothing but what was delivered.
func (s sent) payload() []byte {
	return fmt.Appendf(nil, "%d %d %s", s.producer, s.counter, s.key)
}

func parsePayload(queue string, p []byte) (sent, bool) {
	fields := strings.Fields(string(p))
	if len(fields) != 3 {
		return sent{}, false
	}
	producer, err1 := strconv.Atoi(fields[0])
	counter, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		return sent{}, false
	}
	return sent{queue: queue, key: fields[2], producer: producer, counter: counter}, true
}

// delivery is one handler call as recorded.
type delivery struct {
	id        outbox.MessageID
	queue     string
	partition int
	seq       int64
	attempts  int
	msg       sent
	malformed bool // the payload did not parse
}

// recorder keeps every delivery in arrival order. The handler only records;
// the checks run after the outbox has stopped.
type recorder struct {
	mu       sync.Mutex
	all      []delivery
	distinct map[outbox.MessageID]struct{}

	distinctCount atomic.Int64 // read by progress and the wait without the lock
}

func newRecorder() *recorder {
	return &recorder{distinct: make(map[outbox.MessageID]struct{})}
}

func (r *recorder) add(d delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, d)
	if _, ok := r.distinct[d.id]; !ok {
		r.distinct[d.id] = struct{}{}
		r.distinctCount.Add(1)
	}
}

func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// ledger is what the producers know: committed and rolled-back messages.
type ledger struct {
	mu         sync.Mutex
	committed  map[outbox.MessageID]sent
	rolledBack map[outbox.MessageID]struct{}

	committedCount, rolledBackCount atomic.Int64
}

func newLedger() *ledger {
	return &ledger{committed: make(map[outbox.MessageID]sent), rolledBack: make(map[outbox.MessageID]struct{})}
}

func (l *ledger) commit(ids []outbox.MessageID, msgs []sent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		l.committed[id] = msgs[i]
	}
	l.committedCount.Add(int64(len(ids)))
}

func (l *ledger) rollBack(ids []outbox.MessageID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.rolledBack[id] = struct{}{}
	}
	l.rolledBackCount.Add(int64(len(ids)))
}

func (l *ledger) committedIDs() []outbox.MessageID {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]outbox.MessageID, 0, len(l.committed))
	for id := range l.committed {
		ids = append(ids, id)
	}
	return ids
}

// report is the outcome of every check.
type report struct {
	committed, delivered int
	duplicates           int // deliveries of an id already delivered
	rolledBackDelivered  int
	unknown              int // delivered ids no producer committed
	missing              int // committed ids never delivered
	mismatched           int // delivered content differs from what was committed
	malformed            int
	orderViolations      int // a first delivery whose seq is not the partition's next
	seqConflicts         int // one seq with two ids, or one id with two seqs
	gaps                 int // seqs in 1..max never delivered
	keyOrderViolations   int
	keySplits            int // a key seen in more than one partition
	problems             []string
}

func (r *report) fail(format string, args ...any) {
	const maxProblems = 20 // enough to debug, short enough to read
	if len(r.problems) < maxProblems {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

func (r *report) ok() bool {
	return r.delivered == r.committed && r.duplicates+r.rolledBackDelivered+r.unknown+r.missing+r.mismatched+
		r.malformed+r.orderViolations+r.seqConflicts+r.gaps+r.keyOrderViolations+r.keySplits == 0
}

func okOr(n int) string {
	if n == 0 {
		return "ok"
	}
	return fmt.Sprintf("FAIL(%d)", n)
}

// line is the one-line summary.
func (r *report) line() string {
	verdict := "OK"
	if !r.ok() {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("verify: committed=%d delivered=%d duplicates=%d rolled-back-delivered=%d per-partition-order=%s gaps=%d per-key-order=%s",
		r.committed, r.delivered, r.duplicates, r.rolledBackDelivered, okOr(r.orderViolations+r.seqConflicts), r.gaps, okOr(r.keyOrderViolations+r.keySplits))
	if n := r.unknown + r.missing + r.mismatched + r.malformed; n > 0 {
		s += fmt.Sprintf(" missing=%d unknown=%d mismatched=%d malformed=%d", r.missing, r.unknown, r.mismatched, r.malformed)
	}
	return s + " -> " + verdict
}

type partKey struct {
	queue     string
	partition int
}

type streamKey struct {
	queue, key string
	producer   int
}

func shortID(id outbox.MessageID) string { return hex.EncodeToString(id[:]) }

// verify checks the deliveries, in arrival order, against the ledger. The
// tables were fresh, so every partition's seqs must be exactly 1..n.
func verify(committed map[outbox.MessageID]sent, rolledBack map[outbox.MessageID]struct{}, all []delivery) *report {
	r := &report{committed: len(committed)}
	seen := make(map[outbox.MessageID]delivery, len(all))
	type partState struct {
		next  int64 // seq expected next
		byseq map[int64]outbox.MessageID
	}
	parts := map[partKey]*partState{}
	lastCounter := map[streamKey]int64{}
	keyPart := map[[2]string]int{}

	for _, d := range all {
		if d.malformed {
			r.malformed++
			r.fail("malformed payload: %s/%d seq %d id %s", d.queue, d.partition, d.seq, shortID(d.id))
			continue
		}
		if first, dup := seen[d.id]; dup {
			r.duplicates++
			r.fail("duplicate: id %s delivered again (%s/%d seq %d, attempts %d; first as seq %d)",
				shortID(d.id), d.queue, d.partition, d.seq, d.attempts, first.seq)
			if first.seq != d.seq || first.queue != d.queue || first.partition != d.partition {
				r.seqConflicts++
			}
			continue
		}
		seen[d.id] = d

		switch want, ok := committed[d.id]; {
		case ok && want != d.msg:
			r.mismatched++
			r.fail("mismatch: id %s committed as %+v, delivered as %+v", shortID(d.id), want, d.msg)
		case ok:
		default:
			if _, rb := rolledBack[d.id]; rb {
				r.rolledBackDelivered++
				r.fail("rolled-back message delivered: id %s (%s/%d seq %d)", shortID(d.id), d.queue, d.partition, d.seq)
			} else {
				r.unknown++
				r.fail("unknown message delivered: id %s (%s/%d seq %d)", shortID(d.id), d.queue, d.partition, d.seq)
			}
		}

		pk := partKey{d.queue, d.partition}
		ps := parts[pk]
		if ps == nil {
			ps = &partState{next: 1, byseq: map[int64]outbox.MessageID{}}
			parts[pk] = ps
		}
		if other, taken := ps.byseq[d.seq]; taken {
			r.seqConflicts++
			r.fail("seq reused: %s/%d seq %d carried %s and %s", d.queue, d.partition, d.seq, shortID(other), shortID(d.id))
		} else {
			ps.byseq[d.seq] = d.id
		}
		if d.seq != ps.next {
			r.orderViolations++
			r.fail("order: %s/%d delivered seq %d when %d was next", d.queue, d.partition, d.seq, ps.next)
		}
		ps.next = max(ps.next, d.seq+1)

		kk := [2]string{d.queue, d.msg.key}
		if p, ok := keyPart[kk]; !ok {
			keyPart[kk] = d.partition
		} else if p != d.partition {
			r.keySplits++
			r.fail("key %s/%s delivered on partitions %d and %d", d.queue, d.msg.key, p, d.partition)
		}
		sk := streamKey{d.queue, d.msg.key, d.msg.producer}
		if last, ok := lastCounter[sk]; ok && d.msg.counter <= last {
			r.keyOrderViolations++
			r.fail("key order: %s/%s producer %d message %d arrived after %d", d.queue, d.msg.key, d.msg.producer, d.msg.counter, last)
		}
		lastCounter[sk] = max(lastCounter[sk], d.msg.counter)
	}
	r.delivered = len(seen)

	for pk, ps := range parts {
		if missing := int(ps.next-1) - len(ps.byseq); missing > 0 {
			r.gaps += missing
			r.fail("gaps: %s/%d has %d seqs below %d never delivered", pk.queue, pk.partition, missing, ps.next)
		}
	}
	var missingIDs []outbox.MessageID
	for id := range committed {
		if _, ok := seen[id]; !ok {
			missingIDs = append(missingIDs, id)
		}
	}
	r.missing = len(missingIDs)
	slices.SortFunc(missingIDs, func(a, b outbox.MessageID) int { return cmp.Compare(shortID(a), shortID(b)) })
	for _, id := range missingIDs[:min(len(missingIDs), 5)] {
		m := committed[id]
		r.fail("missing: committed id %s (%s key %s producer %d message %d) never delivered", shortID(id), m.queue, m.key, m.producer, m.counter)
	}
	return r
}
