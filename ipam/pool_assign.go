package ipam

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"time"
)

// Assign gives key an address and returns the assignment. If key already
// holds one, Assign returns it unchanged, so a retried CNI ADD gets the
// address it got the first time.
//
// Placement packs instead of spreading: the address comes from the ENI
// with the lowest device index that has a free address; within that ENI
// from the block with the fewest free addresses (the lowest block address
// breaks ties); within the block, the lowest free address. Pods therefore
// pile onto the primary ENI and onto the fullest blocks, and surplus ENIs
// and prefixes drain so the planner can give them back. An address is never
// handed out while it cools down.
//
// With no free address Assign returns a *NoFreeAddressError carrying the
// pool's Stats.
func (p *Pool) Assign(key Key, pod Pod, now time.Time) (Assignment, error) {
	p.advance(now)
	if err := checkKey(key); err != nil {
		return Assignment{}, fmt.Errorf("assign: %w", err)
	}
	if r, ok := p.owners[key]; ok {
		return r.b.assignment(r.i), nil
	}
	if p.withFree.len() == 0 {
		return Assignment{}, fmt.Errorf("assign %s: %w", key, &NoFreeAddressError{Stats: p.stats()})
	}
	b := p.withFree.min().withFree.min()
	r := addrRef{b: b, i: b.lowestFree()}
	p.hold(r, key, pod, now)
	return b.assignment(r.i), nil
}

// Unassign releases key's address, which then cools down before reuse. It
// returns the assignment released and true, or false when key holds
// nothing (a repeated CNI DEL is not an error).
func (p *Pool) Unassign(key Key, now time.Time) (Assignment, bool) {
	p.advance(now)
	r, ok := p.owners[key]
	if !ok {
		return Assignment{}, false
	}
	a := r.b.assignment(r.i)
	delete(p.owners, key)
	if p.cooldown == 0 {
		p.release(r)
	} else {
		p.startCooling(r, p.clock.Add(p.cooldown))
	}
	return a, true
}

// Restore records that key holds addr since assignedAt, as read from the
// checkpoint when the agent starts. The checkpoint, not the pool, knows who
// holds what, so Restore takes the address it is told to rather than
// choosing one. It is idempotent for the same key and address. It refuses
// an address in no block on the node, an address another key holds, one
// that is cooling down, and a key that already holds another address.
func (p *Pool) Restore(key Key, pod Pod, addr netip.Addr, assignedAt time.Time) (Assignment, error) {
	if err := checkKey(key); err != nil {
		return Assignment{}, fmt.Errorf("restore %s: %w", addr, err)
	}
	if r, ok := p.owners[key]; ok {
		if held := r.b.addr(r.i); held != addr {
			return Assignment{}, fmt.Errorf("restore: %w", &KeyConflictError{Key: key, Held: held, Want: addr})
		}
		return r.b.assignment(r.i), nil
	}
	r, ok := p.locate(addr)
	switch {
	case !ok:
		return Assignment{}, fmt.Errorf("restore %s: %w", key, p.notOnNode(addr))
	case r.b.isCooling(r.i):
		return Assignment{}, fmt.Errorf("restore %s: %w", key, &AddrCoolingError{Addr: addr, Until: r.b.slotAt(r.i).until})
	case r.b.isAssigned(r.i):
		s := r.b.slotAt(r.i)
		return Assignment{}, fmt.Errorf("restore %s: %w", key, &AddrHeldError{Addr: addr, Holder: s.key, Pod: s.pod})
	}
	p.hold(r, key, pod, assignedAt)
	return r.b.assignment(r.i), nil
}

// RestoreCooldown marks a free addr as cooling down, as if released at
// freedAt, so an address freed just before the agent restarted still waits
// out its cooldown. It does nothing when that cooldown is already over by
// the pool's clock, and refuses an address not on the node or assigned.
func (p *Pool) RestoreCooldown(addr netip.Addr, freedAt time.Time) error {
	r, ok := p.locate(addr)
	switch {
	case !ok:
		return fmt.Errorf("restore cooldown: %w", p.notOnNode(addr))
	case r.b.isAssigned(r.i):
		s := r.b.slotAt(r.i)
		return fmt.Errorf("restore cooldown: %w", &AddrHeldError{Addr: addr, Holder: s.key, Pod: s.pod})
	}
	until := freedAt.Add(p.cooldown)
	if !until.After(p.clock) {
		return nil
	}
	if r.b.isCooling(r.i) {
		if !until.After(r.b.slotAt(r.i).until) {
			return nil
		}
		// Keep the later end: drop the address back to free and cool it
		// again, which re-queues it at its new place.
		p.dropCooling(r)
	}
	p.take(r)
	p.startCooling(r, until)
	return nil
}

// dropCooling removes a cooling address's queue entry and frees it.
func (p *Pool) dropCooling(r addrRef) {
	q := &p.cooling
	i := slices.IndexFunc(q.items[q.head:], func(c coolEntry) bool { return c.ref == r })
	if i < 0 {
		panic(fmt.Sprintf("ipam: cooling address %s missing from the cooldown queue", r.b.addr(r.i)))
	}
	q.items = slices.Delete(q.items, q.head+i, q.head+i+1)
	p.release(r)
}

func (p *Pool) hold(r addrRef, key Key, pod Pod, at time.Time) {
	p.take(r)
	r.b.setSlot(r.i, slot{key: key, pod: pod, assignedAt: at})
	p.owners[key] = r
}

func (p *Pool) notOnNode(addr netip.Addr) *AddrNotOnNodeError {
	err := &AddrNotOnNodeError{Addr: addr}
	for _, e := range p.order {
		if e.PrimaryIP == addr {
			err.PrimaryOf = e.ID
		}
	}
	return err
}

func checkKey(k Key) error {
	if k.Network == "" || k.ContainerID == "" || k.IfName == "" {
		return &InvalidKeyError{Key: k}
	}
	return nil
}

// Lookup returns the assignment key holds.
func (p *Pool) Lookup(key Key) (Assignment, bool) {
	r, ok := p.owners[key]
	if !ok {
		return Assignment{}, false
	}
	return r.b.assignment(r.i), true
}

// LookupAddr returns the assignment holding addr; false when addr is free,
// cooling down or not on the node.
func (p *Pool) LookupAddr(addr netip.Addr) (Assignment, bool) {
	r, ok := p.locate(addr)
	if !ok || !r.b.isAssigned(r.i) {
		return Assignment{}, false
	}
	return r.b.assignment(r.i), true
}

// Assignments returns every assignment, by address.
func (p *Pool) Assignments() []Assignment {
	out := make([]Assignment, 0, len(p.owners))
	for _, r := range p.owners {
		out = append(out, r.b.assignment(r.i))
	}
	slices.SortFunc(out, func(x, y Assignment) int { return x.Addr.Compare(y.Addr) })
	return out
}

func lowestBit(v uint32) int {
	if v == 0 {
		panic("ipam: block on the free heap has no free address")
	}
	return bits.TrailingZeros32(v)
}

// Seize records that key holds addr even though the address is free or
// cooling down: the host proves a pod uses it (a route to a pod's veth),
// whatever the pool remembers. It refuses an address in no block on the
// node and one another key holds.
func (p *Pool) Seize(key Key, addr netip.Addr, at time.Time) (Assignment, error) {
	if err := checkKey(key); err != nil {
		return Assignment{}, fmt.Errorf("seize %s: %w", addr, err)
	}
	r, ok := p.locate(addr)
	switch {
	case !ok:
		return Assignment{}, fmt.Errorf("seize %s: %w", key, p.notOnNode(addr))
	case r.b.isAssigned(r.i):
		s := r.b.slotAt(r.i)
		if s.key == key {
			return r.b.assignment(r.i), nil
		}
		return Assignment{}, fmt.Errorf("seize %s: %w", key, &AddrHeldError{Addr: addr, Holder: s.key, Pod: s.pod})
	case r.b.isCooling(r.i):
		p.dropCooling(r)
	}
	return p.Restore(key, Pod{}, addr, at)
}

// IsCooling says whether addr is on the node and cooling down at the
// pool's clock.
func (p *Pool) IsCooling(addr netip.Addr) bool {
	r, ok := p.locate(addr)
	return ok && r.b.isCooling(r.i)
}

// CoolingAddr is an address cooling down, and when its cooldown ends.
type CoolingAddr struct {
	Addr  netip.Addr
	Until time.Time
}

// Cooling lists the addresses cooling down at now, soonest free first:
// what the agent records so that, after a restart, each cools only for
// what is left of its own cooldown (RestoreCooldown).
func (p *Pool) Cooling(now time.Time) []CoolingAddr {
	p.advance(now)
	out := make([]CoolingAddr, 0, p.cooling.len())
	for _, c := range p.cooling.items[p.cooling.head:] {
		out = append(out, CoolingAddr{Addr: c.ref.b.addr(c.ref.i), Until: c.until})
	}
	return out
}
