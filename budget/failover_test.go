package budget

import (
	"container/heap"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A leader's grants are promises its successor cannot see. With the
// controller's timings (Lease 15 s, renew deadline 10 s, retry 2 s) a
// leader grants at most 4 s after its last renewal, and no further ahead
// than the horizon (3 s); the standby takes over 15 s after that renewal
// at the soonest and takes the buckets as empty from 7 s before its term
// (controller.Settings.Horizon, with a second for a job's calls): the
// refill since the last grant could run. Nodes in a join keep asking through it, each for two ENIs'
// creates and attaches in turn, holding their jobs while no leader
// answers, and EC2 must refuse none of the calls of either term. (The
// shortest gap, 3 s with the buckets empty from the term's start, is
// what the horizon alone keeps safe.) Without Config.Horizon the first
// leader's grants ran a minute past its end and the second granted the
// same tokens again.
func TestAFailoverSpendsNoBucketTwice(t *testing.T) {
	const nodes = 400
	stop := t0.Add(20 * time.Second) // the last grant
	for _, tc := range []struct {
		horizon time.Duration
		// begin is when the next term starts after the last grant,
		// empty when its buckets are taken as empty.
		begin, empty time.Duration
	}{
		{3 * time.Second, 11 * time.Second, 4 * time.Second},
		{3 * time.Second, 3 * time.Second, 3 * time.Second},
		{1500 * time.Millisecond, 3 * time.Second, 3 * time.Second},
	} {
		t.Run(fmt.Sprint(tc.horizon, tc.begin, tc.empty), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Horizon = tc.horizon
			old, next := New(cfg), New(cfg)
			termStarted := false
			calls := failoverJoin(nodes, func(now time.Time) *Ledger {
				switch {
				case now.Before(stop):
					return old
				case now.Before(stop.Add(tc.begin)):
					return nil
				}
				if !termStarted {
					next.StartTerm(stop.Add(tc.empty))
					termStarted = true
				}
				return next
			})
			if len(calls) != nodes*4 {
				t.Fatalf("%d calls made; want %d (every node's two creates and two attaches)", len(calls), nodes*4)
			}
			late := 0
			for _, c := range calls {
				if c.at.After(stop.Add(tc.empty)) && c.granted == old {
					late++
				}
			}
			if late > 0 {
				t.Errorf("%d calls granted by the old leader made after the new term's buckets count as empty", late)
			}
			if at, a, ok := refused(calls); !ok {
				t.Fatalf("EC2 would refuse %s at %v (old leader's last grant at %v, new term at %v)", a, at.Sub(t0), stop.Sub(t0), stop.Add(tc.begin).Sub(t0))
			}
		})
	}
}

type grantedCall struct {
	call
	granted *Ledger
}

// failoverJoin plays a join: each node asks, urgently, for a create, then
// an attach, then again, asking whichever ledger leads (nil: none, and
// the node asks again ElectionPause later, as the agents' client holds
// its jobs), coming back when deferred with its ticket.
func failoverJoin(nodes int, leader func(now time.Time) *Ledger) []grantedCall {
	var q evq
	var calls []grantedCall
	steps := []string{"CreateNetworkInterface", "AttachNetworkInterface", "CreateNetworkInterface", "AttachNetworkInterface"}
	var ask func(node string, step int, ticket uint64, now time.Time)
	ask = func(node string, step int, ticket uint64, now time.Time) {
		l := leader(now)
		if l == nil {
			q.at(now.Add(2*time.Second), func(now time.Time) { ask(node, step, 0, now) })
			return
		}
		g := l.Reserve(now, Request{Node: node, Actions: []string{steps[step]}, Urgent: true, Ticket: ticket})
		if !g.Granted() {
			q.at(now.Add(g.Deferred), func(now time.Time) { ask(node, step, g.Ticket, now) })
			return
		}
		at := now.Add(g.Wait)
		calls = append(calls, grantedCall{call{at, steps[step]}, l})
		if step+1 < len(steps) {
			// The call and the next step's set-up take a moment.
			q.at(at.Add(100*time.Millisecond), func(now time.Time) { ask(node, step+1, 0, now) })
		}
	}
	for i := range nodes {
		node := fmt.Sprintf("n%d", i)
		q.at(t0.Add(time.Duration(i)*time.Millisecond), func(now time.Time) { ask(node, 0, 0, now) })
	}
	for q.h.Len() > 0 {
		e := heap.Pop(&q.h).(ev)
		e.fn(e.at)
	}
	return calls
}

// refused plays calls against EC2's buckets (DefaultConfig's, in full)
// and says which call, if any, EC2 would refuse.
func refused(calls []grantedCall) (time.Time, string, bool) {
	slices.SortStableFunc(calls, func(a, b grantedCall) int { return a.at.Compare(b.at) })
	buckets := map[string]*tokenBucket{}
	for _, c := range calls {
		b, ok := buckets[c.action]
		if !ok {
			spec := DefaultConfig().Buckets[c.action]
			b = &tokenBucket{burst: float64(spec.Burst), refill: spec.Refill}
			buckets[c.action] = b
		}
		if !b.take(c.at) {
			return c.at, c.action, false
		}
	}
	return time.Time{}, "", true
}

// ev is an event of failoverJoin's timeline; seq keeps events of one
// instant in the order they were made.
type ev struct {
	at  time.Time
	seq int
	fn  func(now time.Time)
}

type evHeap []ev

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(ev)) }
func (h *evHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type evq struct {
	h   evHeap
	seq int
}

func (q *evq) at(t time.Time, fn func(time.Time)) {
	q.seq++
	heap.Push(&q.h, ev{at: t, seq: q.seq, fn: fn})
}
