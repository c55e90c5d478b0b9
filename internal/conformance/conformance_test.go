package conformance

import (
	"testing"

	"github.com/seqbox/seqbox/internal/dbtest"
)

// TestConformance runs the whole suite on every database, the databases in
// parallel with each other and the cases of one database in sequence.
func TestConformance(t *testing.T) {
	for _, o := range dbtest.All() {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			Run(t, o.Open(t), Cases())
		})
	}
}
