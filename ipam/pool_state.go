package ipam

import (
	"fmt"
	"time"
)

// An address moves free → assigned → cooling → free. These three methods
// are the only places that move it, and each keeps the block bitmaps, the
// ENI and node counters and both free heaps in step.

// take moves a free address to assigned.
func (p *Pool) take(r addrRef) {
	b, e := r.b, r.b.eni
	if !b.isFree(r.i) {
		panic(fmt.Sprintf("ipam: taking %s, which is not free", b.addr(r.i)))
	}
	b.markTaken(r.i)
	if b.nFree() == 0 {
		e.withFree.remove(b)
	} else {
		e.withFree.update(b)
	}
	e.free--
	e.assigned++
	p.free--
	p.assigned++
	if e.free == 0 {
		p.withFree.remove(e)
	}
}

// startCooling moves an assigned address to cooling until the given time.
func (p *Pool) startCooling(r addrRef, until time.Time) {
	b, e := r.b, r.b.eni
	if !b.isAssigned(r.i) {
		panic(fmt.Sprintf("ipam: cooling %s, which is not assigned", b.addr(r.i)))
	}
	b.markCooling(r.i)
	b.setSlot(r.i, slot{until: until})
	e.assigned--
	e.cooling++
	p.assigned--
	p.nCooling++
	p.cooling.add(coolEntry{ref: r, until: until})
}

// release moves an assigned or cooling address to free.
func (p *Pool) release(r addrRef) {
	b, e := r.b, r.b.eni
	switch {
	case b.isFree(r.i):
		panic(fmt.Sprintf("ipam: releasing %s, which is already free", b.addr(r.i)))
	case b.isCooling(r.i):
		e.cooling--
		p.nCooling--
	default:
		e.assigned--
		p.assigned--
	}
	wasFull := b.nFree() == 0
	b.markFree(r.i)
	if wasFull {
		e.withFree.push(b)
	} else {
		e.withFree.update(b)
	}
	if e.free == 0 {
		p.withFree.push(e)
	}
	e.free++
	p.free++
}

// advance moves the pool's clock to now unless it is already later, then
// frees every address whose cooldown has ended by the clock.
func (p *Pool) advance(now time.Time) {
	if now.After(p.clock) {
		p.clock = now
	}
	for {
		c, ok := p.cooling.peek()
		if !ok || c.until.After(p.clock) {
			return
		}
		p.cooling.pop()
		if !c.ref.b.isCooling(c.ref.i) || !c.ref.b.slotAt(c.ref.i).until.Equal(c.until) {
			panic(fmt.Sprintf("ipam: cooldown queue entry for %s does not match the address", c.ref.b.addr(c.ref.i)))
		}
		p.release(c.ref)
	}
}

// coolQueue holds the cooling addresses in the order their cooldowns end.
// The cooldown is constant and the pool's clock never goes back, so
// addresses freed by Unassign arrive in order and add is an append; only a
// cooldown restored from a checkpoint can land earlier in the queue.
type coolQueue struct {
	items []coolEntry
	head  int
}

type coolEntry struct {
	ref   addrRef
	until time.Time
}

func (q *coolQueue) len() int { return len(q.items) - q.head }

func (q *coolQueue) peek() (coolEntry, bool) {
	if q.len() == 0 {
		return coolEntry{}, false
	}
	return q.items[q.head], true
}

func (q *coolQueue) pop() {
	q.items[q.head] = coolEntry{}
	q.head++
	// Reclaim the consumed front once it is half the slice, so a queue that
	// never empties under steady churn stays bounded.
	if q.head >= 64 && q.head*2 >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.head = 0
	}
}

func (q *coolQueue) add(c coolEntry) {
	q.items = append(q.items, c)
	i := len(q.items) - 1
	for i > q.head && q.items[i-1].until.After(c.until) {
		q.items[i] = q.items[i-1]
		i--
	}
	q.items[i] = c
}
