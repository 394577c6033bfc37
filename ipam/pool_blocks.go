package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// AddBlock adds an address block EC2 assigned to the ENI: a secondary
// address as a /32, or a delegated /28 prefix. The block must lie inside the
// ENI's subnet, overlap no block on the node (adding the same block twice is
// an overlap) and hold no ENI's primary address. All its addresses start
// free.
func (p *Pool) AddBlock(eniID string, prefix netip.Prefix) error {
	e, ok := p.enis[eniID]
	if !ok {
		return fmt.Errorf("add block %s: %w", prefix, &UnknownENIError{ID: eniID})
	}
	if err := p.checkNewBlock(e, prefix); err != nil {
		return fmt.Errorf("add block: %w", err)
	}
	b := newBlock(prefix, e)
	p.blocks[prefix] = b
	i, _ := slices.BinarySearchFunc(e.blocks, prefix.Addr(), func(x *block, a netip.Addr) int {
		return x.prefix.Addr().Compare(a)
	})
	e.blocks = slices.Insert(e.blocks, i, b)
	n := b.size()
	e.withFree.push(b)
	if e.free == 0 {
		p.withFree.push(e)
	}
	e.free += n
	p.free += n
	return nil
}

func (p *Pool) checkNewBlock(e *eniEntry, prefix netip.Prefix) error {
	if prefix.IsValid() && prefix.Addr().Is6() {
		return p.checkNewBlock6(e, prefix)
	}
	switch {
	case !prefix.IsValid() || !prefix.Addr().Is4():
		return &InvalidBlockError{Block: prefix, Reason: "not an IPv4 prefix"}
	case prefix.Bits() != secondaryBits && prefix.Bits() != PrefixBits:
		return &InvalidBlockError{Block: prefix, Reason: "size must be /32 (secondary address) or /28 (delegated prefix)"}
	case prefix.Masked() != prefix:
		return &InvalidBlockError{Block: prefix, Reason: fmt.Sprintf("host bits set (want %s)", prefix.Masked())}
	case e.SubnetCIDR.Bits() > prefix.Bits() || !e.SubnetCIDR.Contains(prefix.Addr()):
		return &BlockOutsideSubnetError{Block: prefix, ENIID: e.ID, Subnet: e.SubnetCIDR}
	}
	if other := p.overlapping(prefix); other != nil {
		return &OverlapError{Block: prefix, Other: other.prefix, OtherENI: other.eni.ID}
	}
	for _, o := range p.order {
		if prefix.Contains(o.PrimaryIP) {
			return &PrimaryIPError{Block: prefix, BlockENI: e.ID, Addr: o.PrimaryIP, ENIID: o.ID}
		}
	}
	return nil
}

// checkNewBlock6 checks an IPv6 block: a /80 inside the ENI's IPv6
// subnet, not already on the node. /80s never overlap but by being equal.
func (p *Pool) checkNewBlock6(e *eniEntry, prefix netip.Prefix) error {
	switch {
	case prefix.Addr().Is4In6() || prefix.Addr().Zone() != "":
		return &InvalidBlockError{Block: prefix, Reason: "not a plain IPv6 prefix"}
	case prefix.Bits() != prefix6Bits:
		return &InvalidBlockError{Block: prefix, Reason: "an IPv6 block must be a /80 (delegated prefix)"}
	case prefix.Masked() != prefix:
		return &InvalidBlockError{Block: prefix, Reason: fmt.Sprintf("host bits set (want %s)", prefix.Masked())}
	case !e.SubnetIPv6CIDR.IsValid() || e.SubnetIPv6CIDR.Bits() > prefix.Bits() || !e.SubnetIPv6CIDR.Contains(prefix.Addr()):
		return &BlockOutsideSubnetError{Block: prefix, ENIID: e.ID, Subnet: e.SubnetIPv6CIDR}
	}
	if other, ok := p.blocks[prefix]; ok {
		return &OverlapError{Block: prefix, Other: other.prefix, OtherENI: other.eni.ID}
	}
	return nil
}

// overlapping returns a block on the node that shares an address with
// prefix, or nil. Blocks come in two sizes, so a /28 can only overlap the
// same /28 or one of the 16 /32s inside it, and a /32 only itself or the /28
// around it.
func (p *Pool) overlapping(prefix netip.Prefix) *block {
	if prefix.Bits() == secondaryBits {
		if ref, ok := p.locate(prefix.Addr()); ok {
			return ref.b
		}
		return nil
	}
	if b, ok := p.blocks[prefix]; ok {
		return b
	}
	for a, i := prefix.Addr(), 0; i < PrefixAddrs; a, i = a.Next(), i+1 {
		if b, ok := p.blocks[netip.PrefixFrom(a, secondaryBits)]; ok {
			return b
		}
	}
	return nil
}

// locate finds the block holding addr.
func (p *Pool) locate(addr netip.Addr) (addrRef, bool) {
	if addr.Is6() && !addr.Is4In6() && addr.Zone() == "" {
		pfx, _ := addr.Prefix(prefix6Bits)
		if b, ok := p.blocks[pfx]; ok {
			return addrRef{b: b, i: b.offset(addr)}, true
		}
		return addrRef{}, false
	}
	if !addr.Is4() {
		return addrRef{}, false
	}
	for _, bits := range [...]int{secondaryBits, PrefixBits} {
		pfx, _ := addr.Prefix(bits)
		if b, ok := p.blocks[pfx]; ok {
			return addrRef{b: b, i: b.offset(addr)}, true
		}
	}
	return addrRef{}, false
}

// RemoveBlock removes a block the agent is giving back to EC2 (or EC2 no
// longer lists). It refuses, with an *InUseError, while any of its addresses
// is assigned or cooling down at now.
func (p *Pool) RemoveBlock(prefix netip.Prefix, now time.Time) error {
	p.advance(now)
	b, ok := p.blocks[prefix]
	if !ok {
		return fmt.Errorf("remove block: %w", &UnknownBlockError{Block: prefix})
	}
	if b.nFree() != b.size() {
		return fmt.Errorf("remove block: %w", &InUseError{
			ENIID: b.eni.ID, Block: prefix,
			Assigned: b.nAssigned(), Cooling: b.nCooling(), Until: b.lastCooling(),
		})
	}
	p.dropBlock(b)
	return nil
}

// dropBlock forgets a block whose addresses are all free.
func (p *Pool) dropBlock(b *block) {
	if b.nFree() != b.size() {
		panic(fmt.Sprintf("ipam: dropping block %s with addresses in use", b.prefix))
	}
	e := b.eni
	n := b.size()
	e.withFree.remove(b)
	e.free -= n
	p.free -= n
	if e.free == 0 {
		p.withFree.remove(e)
	}
	delete(p.blocks, b.prefix)
	e.blocks = slices.DeleteFunc(e.blocks, func(x *block) bool { return x == b })
}
