package engine

import (
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/processor"
)

// testSpec is a queue of the pool with h and opts resolved and bound as
// Start does.
func testSpec(name string, h processor.Handler, ids []int64, opts ...processor.QueueOption) QueueSpec {
	own := make([]handling.Option, len(opts))
	for i, o := range opts {
		own[i] = o.(handling.Option)
	}
	hh := h.(handling.Handler)
	return QueueSpec{Name: name, Runner: hh.Bind(own), Transactional: hh.Transactional(),
		Options: handling.Resolve(nil, own), PartitionIDs: ids}
}
