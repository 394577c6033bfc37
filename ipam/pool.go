package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Pool is the node's address pool: ENIs, the address blocks EC2 gave each
// of them, and which attachment holds which address. It performs no I/O
// and reads no clock; every call that depends on time takes now.
//
// The pool keeps its own clock: the latest now it has been given. A freed
// address cools down until that clock plus the cooldown, and comes free only
// when the clock reaches that point, so a now that repeats or goes backwards
// can delay reuse but never hurry it.
//
// A Pool is not safe for concurrent use; the agent serialises calls.
type Pool struct {
	cooldown time.Duration
	clock    time.Time

	enis   map[string]*eniEntry
	order  []*eniEntry // by device index
	blocks map[netip.Prefix]*block
	owners map[Key]addrRef

	// withFree holds the ENIs that have a free address, lowest device index
	// first: the front is where the next address comes from.
	withFree indexedHeap[*eniEntry]
	cooling  coolQueue

	assigned, nCooling, free int
}

// eniEntry is an ENI and the pool's bookkeeping for it.
type eniEntry struct {
	ENI
	blocks   []*block // by address
	withFree indexedHeap[*block]
	heapIdx  int

	assigned, cooling, free int
}

// addrRef locates one address: the block and its offset in it.
type addrRef struct {
	b *block
	i int
}

// NewPool returns an empty pool whose freed addresses wait cooldown before
// they are handed out again. A zero cooldown reuses addresses at once. A
// negative cooldown is a programming error and panics, as time.NewTicker
// does for a non-positive period.
func NewPool(cooldown time.Duration) *Pool {
	if cooldown < 0 {
		panic(fmt.Sprintf("ipam: negative cooldown %v", cooldown))
	}
	return &Pool{
		cooldown: cooldown,
		enis:     make(map[string]*eniEntry),
		blocks:   make(map[netip.Prefix]*block),
		owners:   make(map[Key]addrRef),
		withFree: indexedHeap[*eniEntry]{
			less:  func(x, y *eniEntry) bool { return x.DeviceIndex < y.DeviceIndex },
			index: func(e *eniEntry) *int { return &e.heapIdx },
		},
	}
}

// Cooldown returns how long a freed address waits before reuse.
func (p *Pool) Cooldown() time.Duration { return p.cooldown }

// AddENI adds an attached ENI with no blocks yet. Its subnet must be an
// IPv4 prefix holding its primary address; its id, device index and
// primary address must be new to the node, and no block may already hold
// the primary address.
func (p *Pool) AddENI(eni ENI) error {
	if err := p.checkNewENI(eni); err != nil {
		return fmt.Errorf("add eni: %w", err)
	}
	eni.SecurityGroups = slices.Clone(eni.SecurityGroups)
	e := &eniEntry{
		ENI:     eni,
		heapIdx: -1,
		withFree: indexedHeap[*block]{
			less:  packOrder,
			index: func(b *block) *int { return &b.heapIdx },
		},
	}
	p.enis[eni.ID] = e
	i, _ := slices.BinarySearchFunc(p.order, eni.DeviceIndex, func(x *eniEntry, d int) int { return x.DeviceIndex - d })
	p.order = slices.Insert(p.order, i, e)
	return nil
}

func (p *Pool) checkNewENI(eni ENI) error {
	bad := func(reason string, args ...any) error {
		return &InvalidENIError{ID: eni.ID, Reason: fmt.Sprintf(reason, args...)}
	}
	switch {
	case eni.ID == "":
		return bad("empty id")
	case eni.DeviceIndex < 0:
		return bad("negative device index %d", eni.DeviceIndex)
	case !eni.SubnetCIDR.IsValid() || !eni.SubnetCIDR.Addr().Is4():
		return bad("subnet %q is not an IPv4 CIDR", eni.SubnetCIDR)
	case eni.SubnetCIDR.Masked() != eni.SubnetCIDR:
		return bad("subnet %s has host bits set (want %s)", eni.SubnetCIDR, eni.SubnetCIDR.Masked())
	case !eni.PrimaryIP.Is4() || !eni.SubnetCIDR.Contains(eni.PrimaryIP):
		return bad("primary address %q is not inside subnet %s", eni.PrimaryIP, eni.SubnetCIDR)
	}
	if old, ok := p.enis[eni.ID]; ok {
		return &DuplicateENIError{ID: eni.ID, DeviceIndex: eni.DeviceIndex, Other: old.ID}
	}
	for _, e := range p.order {
		if e.DeviceIndex == eni.DeviceIndex {
			return &DuplicateENIError{ID: eni.ID, DeviceIndex: eni.DeviceIndex, Other: e.ID}
		}
		if e.PrimaryIP == eni.PrimaryIP {
			return bad("primary address %s already belongs to eni %s", eni.PrimaryIP, e.ID)
		}
	}
	if ref, ok := p.locate(eni.PrimaryIP); ok {
		return &PrimaryIPError{Block: ref.b.prefix, BlockENI: ref.b.eni.ID, Addr: eni.PrimaryIP, ENIID: eni.ID}
	}
	return nil
}

// RemoveENI removes a detached ENI and its blocks. It refuses, with an
// *InUseError, while any of its addresses is assigned or cooling down at
// now, and refuses the instance's primary ENI, which EC2 never detaches.
func (p *Pool) RemoveENI(id string, now time.Time) error {
	p.advance(now)
	e, ok := p.enis[id]
	if !ok {
		return fmt.Errorf("remove eni: %w", &UnknownENIError{ID: id})
	}
	if e.Primary {
		return fmt.Errorf("remove eni: %w", &PrimaryENIError{ID: id})
	}
	if e.assigned > 0 || e.cooling > 0 {
		return fmt.Errorf("remove eni: %w", e.inUse())
	}
	for _, b := range slices.Clone(e.blocks) {
		p.dropBlock(b)
	}
	if p.withFree.contains(e) {
		panic("ipam: eni with no blocks is still listed as having free addresses")
	}
	delete(p.enis, id)
	p.order = slices.DeleteFunc(p.order, func(x *eniEntry) bool { return x == e })
	return nil
}

func (e *eniEntry) inUse() *InUseError {
	err := &InUseError{ENIID: e.ID, Assigned: e.assigned, Cooling: e.cooling}
	for _, b := range e.blocks {
		if t := b.lastCooling(); t.After(err.Until) {
			err.Until = t
		}
	}
	return err
}

// ENI returns the ENI with the given id.
func (p *Pool) ENI(id string) (ENI, bool) {
	e, ok := p.enis[id]
	if !ok {
		return ENI{}, false
	}
	return e.clone(), true
}

// ENIs returns the node's ENIs by device index.
func (p *Pool) ENIs() []ENI {
	out := make([]ENI, len(p.order))
	for i, e := range p.order {
		out[i] = e.clone()
	}
	return out
}

func (e *eniEntry) clone() ENI {
	c := e.ENI
	c.SecurityGroups = slices.Clone(c.SecurityGroups)
	return c
}
