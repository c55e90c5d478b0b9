// The two heaps the scheduler keeps: ready partitions, oldest dirtySince
// first, and delayed ones, earliest readyAt first.

package prioritizer

// readyQueue is a min-heap of ready partitions by (dirtySince, id).
type readyQueue []*partition

func (q readyQueue) Len() int { return len(q) }

func (q readyQueue) Less(i, j int) bool {
	if !q[i].dirtySince.Equal(q[j].dirtySince) {
		return q[i].dirtySince.Before(q[j].dirtySince)
	}
	return q[i].id < q[j].id
}

func (q readyQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].readyIndex = i
	q[j].readyIndex = j
}

func (q *readyQueue) Push(x any) {
	entry := x.(*partition)
	entry.readyIndex = len(*q)
	*q = append(*q, entry)
}

func (q *readyQueue) Pop() any {
	old := *q
	last := len(old) - 1
	entry := old[last]
	old[last] = nil // let the entry be collected once idle
	entry.readyIndex = notInHeap
	*q = old[:last]
	return entry
}

// delayedQueue is a min-heap of delayed partitions by readyAt.
type delayedQueue []*partition

func (q delayedQueue) Len() int { return len(q) }

func (q delayedQueue) Less(i, j int) bool {
	if !q[i].readyAt.Equal(q[j].readyAt) {
		return q[i].readyAt.Before(q[j].readyAt)
	}
	return q[i].id < q[j].id
}

func (q delayedQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].delayedIndex = i
	q[j].delayedIndex = j
}

func (q *delayedQueue) Push(x any) {
	entry := x.(*partition)
	entry.delayedIndex = len(*q)
	*q = append(*q, entry)
}

func (q *delayedQueue) Pop() any {
	old := *q
	last := len(old) - 1
	entry := old[last]
	old[last] = nil // let the entry be collected once idle
	entry.delayedIndex = notInHeap
	*q = old[:last]
	return entry
}
