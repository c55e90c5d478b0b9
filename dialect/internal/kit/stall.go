package kit

import (
	"sync"
	"time"
)

// StallWatch tells a pinned generation that is draining from one that is
// stuck (docs/ROTATION.md, "The rotator"). It keeps, from one look to the
// next, the cursors of the partitions that hold messages of the pinned
// generation not acked yet. The generation is stuck when one of them has
// not moved since the previous look (a parked partition, a handler
// failing, a consumer gone); while every one of them moves, the backlog is
// draining and the generation will be truncated once it is drained.
type StallWatch struct {
	mu      sync.Mutex
	gen     int
	at      time.Time
	cursors map[int64]int64 // nil: no look since the last Reset
	stuck   bool
}

// Due reports whether generation gen needs a fresh look at now: the first
// since a Reset or since another generation pinned, or the previous one
// at least after ago. When it does not, stuck is the last verdict.
func (w *StallWatch) Due(gen int, now time.Time, after time.Duration) (due, stuck bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cursors == nil || w.gen != gen || now.Sub(w.at) >= after {
		return true, false
	}
	return false, w.stuck
}

// Look records generation gen's pending partitions and their cursors, read
// at now, and says whether it is stuck: a partition pending at the
// previous look of the same generation is pending still, at the same
// cursor. A first look is never stuck: the next one decides.
func (w *StallWatch) Look(gen int, now time.Time, cursors map[int64]int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	stuck := false
	if w.cursors != nil && w.gen == gen {
		for pid, c := range cursors {
			if was, ok := w.cursors[pid]; ok && c <= was {
				stuck = true
				break
			}
		}
	}
	if cursors == nil {
		cursors = map[int64]int64{}
	}
	w.gen, w.at, w.cursors, w.stuck = gen, now, cursors, stuck
	return stuck
}

// Reset forgets the looks: nothing is pinned.
func (w *StallWatch) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cursors, w.stuck = nil, false
}
