package scale

import (
	"container/heap"
	"time"
)

// event is something that happens at a simulated time. seq keeps events
// of the same time in the order they were scheduled, so a run replays.
type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// queue is the run's timeline. clock.Manual's own timers sort on every
// callback, which is quadratic with thousands of nodes; the queue is a
// heap and moves the manual clock itself.
type queue struct {
	h   eventHeap
	seq uint64
}

func (q *queue) at(t time.Time, fn func()) {
	q.seq++
	heap.Push(&q.h, event{at: t, seq: q.seq, fn: fn})
}

func (q *queue) pop() (event, bool) {
	if len(q.h) == 0 {
		return event{}, false
	}
	return heap.Pop(&q.h).(event), true
}

func (q *queue) peek() (time.Time, bool) {
	if len(q.h) == 0 {
		return time.Time{}, false
	}
	return q.h[0].at, true
}
