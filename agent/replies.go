package agent

import (
	"sync"

	"github.com/vpcnet/vpcnet/agent/nodestate"
)

// replies routes each of the owner's replies, and an Add's announced
// address before it, to the request that waits for it. Requests open and
// forget on their own goroutines while the owner delivers, hence the
// lock.
type replies struct {
	mu      sync.Mutex // guards below; never held across I/O
	waiting map[uint64]waiter
	nextID  uint64
}

// waiter is one open request's channels. assigned is nil for a request
// that does not listen for announcements (Submit's, the Del's, the GC's).
type waiter struct {
	reply    chan nodestate.Reply
	assigned chan nodestate.Reply
}

// open registers a request under a fresh id. The channel holds one
// reply, so delivering never waits for the requester.
func (rs *replies) open() (uint64, <-chan nodestate.Reply) {
	id, w := rs.register(false)
	return id, w.reply
}

// openAdd registers an Add that also hears its address announced
// (nodestate.Ready.Assigned) while the checkpoint that records it is
// written. Each channel holds one value, so the owner never waits.
func (rs *replies) openAdd() (uint64, <-chan nodestate.Reply, <-chan nodestate.Reply) {
	id, w := rs.register(true)
	return id, w.reply, w.assigned
}

func (rs *replies) register(announce bool) (uint64, waiter) {
	w := waiter{reply: make(chan nodestate.Reply, 1)}
	if announce {
		w.assigned = make(chan nodestate.Reply, 1)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.waiting == nil {
		rs.waiting = make(map[uint64]waiter)
	}
	rs.nextID++
	rs.waiting[rs.nextID] = w
	return rs.nextID, w
}

// forget drops a request whose caller no longer waits.
func (rs *replies) forget(id uint64) {
	rs.mu.Lock()
	delete(rs.waiting, id)
	rs.mu.Unlock()
}

// announce hands an Add its address ahead of its reply, if it still
// waits and listens; it stays registered for the reply. The machine
// announces an Add at most once, so the channel's one slot is enough.
func (rs *replies) announce(r nodestate.Reply) {
	rs.mu.Lock()
	w, ok := rs.waiting[r.ID]
	rs.mu.Unlock()
	if ok && w.assigned != nil {
		w.assigned <- r
	}
}

// deliver hands r to its request, if that still waits.
func (rs *replies) deliver(r nodestate.Reply) {
	rs.mu.Lock()
	w, ok := rs.waiting[r.ID]
	delete(rs.waiting, r.ID)
	rs.mu.Unlock()
	if ok {
		w.reply <- r
	}
}

// failAll answers every request still waiting with err: the agent stops.
func (rs *replies) failAll(err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, w := range rs.waiting {
		w.reply <- nodestate.Reply{ID: id, Err: err}
		delete(rs.waiting, id)
	}
}
