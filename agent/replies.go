package agent

import (
	"sync"

	"github.com/vpcnet/vpcnet/agent/nodestate"
)

// replies routes each of the owner's replies to the request that waits
// for it. Requests open and forget on their own goroutines while the
// owner delivers, hence the lock.
type replies struct {
	mu      sync.Mutex // guards below; never held across I/O
	waiting map[uint64]chan nodestate.Reply
	nextID  uint64
}

// open registers a request under a fresh id. The channel holds one
// reply, so delivering never waits for the requester.
func (rs *replies) open() (uint64, <-chan nodestate.Reply) {
	ch := make(chan nodestate.Reply, 1)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.waiting == nil {
		rs.waiting = make(map[uint64]chan nodestate.Reply)
	}
	rs.nextID++
	rs.waiting[rs.nextID] = ch
	return rs.nextID, ch
}

// forget drops a request whose caller no longer waits.
func (rs *replies) forget(id uint64) {
	rs.mu.Lock()
	delete(rs.waiting, id)
	rs.mu.Unlock()
}

// deliver hands r to its request, if that still waits.
func (rs *replies) deliver(r nodestate.Reply) {
	rs.mu.Lock()
	ch, ok := rs.waiting[r.ID]
	delete(rs.waiting, r.ID)
	rs.mu.Unlock()
	if ok {
		ch <- r
	}
}

// failAll answers every request still waiting with err: the agent stops.
func (rs *replies) failAll(err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, ch := range rs.waiting {
		ch <- nodestate.Reply{ID: id, Err: err}
		delete(rs.waiting, id)
	}
}
