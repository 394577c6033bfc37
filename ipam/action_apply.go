package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// ApplyActions returns the snapshot as it would be after every action
// succeeded, for tests, simulation and the benchmark driver; s is not
// changed. New blocks are entirely free and take addresses used nowhere
// else in the snapshot; a new ENI takes the lowest free device index, the
// ID "eni-<index>" (suffixed if taken), creation time now, and the
// subnet's CIDR if another ENI shows it.
//
// It refuses what EC2 or the pool would refuse, naming the action:
// unknown ENIs, releasing a block that is not entirely free or not on the
// ENI, detaching the primary ENI or one with an address in use, more
// blocks than an ENI can carry, more ENIs than lim allows.
func ApplyActions(s Snapshot, actions []Action, lim Limits, now time.Time) (Snapshot, error) {
	out := Snapshot{Waiting: s.Waiting, Expected: s.Expected, ENIs: make([]ENIState, len(s.ENIs))}
	for i, e := range s.ENIs {
		e.Blocks = slices.Clone(e.Blocks)
		e.SecurityGroups = slices.Clone(e.SecurityGroups)
		out.ENIs[i] = e
	}
	next := newAddrCursor(s)
	for i, a := range actions {
		if err := out.apply(a, lim, now, next); err != nil {
			return Snapshot{}, fmt.Errorf("action %d (%s): %w", i, a, err)
		}
	}
	slices.SortStableFunc(out.ENIs, func(a, b ENIState) int { return a.DeviceIndex - b.DeviceIndex })
	return out, nil
}

func (s *Snapshot) apply(a Action, lim Limits, now time.Time, next *addrCursor) error {
	if a.Kind == AttachENI {
		return s.attach(a, lim, now, next)
	}
	i := slices.IndexFunc(s.ENIs, func(e ENIState) bool { return e.ID == a.ENIID })
	if i < 0 {
		return fmt.Errorf("no ENI %q in the snapshot", a.ENIID)
	}
	e := &s.ENIs[i]
	switch a.Kind {
	case AssignBlocks:
		if a.Count < 1 || len(e.Blocks)+a.Count > lim.IPv4PerENI-1 {
			return fmt.Errorf("%s has %d of %d blocks; cannot assign %d", e.ID, len(e.Blocks), lim.IPv4PerENI-1, a.Count)
		}
		e.Blocks = append(e.Blocks, next.blocks(a.Count, a.Prefixes)...)
	case ReleaseBlocks:
		for _, p := range a.Blocks {
			j := slices.IndexFunc(e.Blocks, func(b BlockState) bool { return b.Prefix == p })
			if j < 0 {
				return fmt.Errorf("%s has no block %s", e.ID, p)
			}
			if b := e.Blocks[j]; b.Assigned != 0 || b.Cooling != 0 {
				return fmt.Errorf("block %s on %s has %d assigned and %d cooling addresses", p, e.ID, b.Assigned, b.Cooling)
			}
			e.Blocks = slices.Delete(e.Blocks, j, j+1)
		}
	case DetachENI:
		if e.Primary || e.DeviceIndex == 0 {
			return fmt.Errorf("%s is the primary ENI", e.ID)
		}
		for _, b := range e.Blocks {
			if b.Assigned != 0 || b.Cooling != 0 {
				return fmt.Errorf("block %s on %s has %d assigned and %d cooling addresses", b.Prefix, e.ID, b.Assigned, b.Cooling)
			}
		}
		s.ENIs = slices.Delete(s.ENIs, i, i+1)
	default:
		return fmt.Errorf("unknown action kind %d", int(a.Kind))
	}
	return nil
}

func (s *Snapshot) attach(a Action, lim Limits, now time.Time, next *addrCursor) error {
	if len(s.ENIs) >= lim.MaxENIs {
		return fmt.Errorf("%d ENIs attached, the limit is %d", len(s.ENIs), lim.MaxENIs)
	}
	if a.Count < 1 || a.Count > lim.IPv4PerENI-1 {
		return fmt.Errorf("an ENI carries 1 to %d blocks, not %d", lim.IPv4PerENI-1, a.Count)
	}
	dev := 0
	for slices.ContainsFunc(s.ENIs, func(e ENIState) bool { return e.DeviceIndex == dev }) {
		dev++
	}
	id := fmt.Sprintf("eni-%d", dev)
	for n := 2; slices.ContainsFunc(s.ENIs, func(e ENIState) bool { return e.ID == id }); n++ {
		id = fmt.Sprintf("eni-%d-%d", dev, n)
	}
	e := ENIState{ENI: ENI{
		ID:             id,
		DeviceIndex:    dev,
		SubnetID:       a.SubnetID,
		SecurityGroups: slices.Clone(a.SecurityGroups),
		PrimaryIP:      next.blocks(1, false)[0].Prefix.Addr(),
		CreatedAt:      now,
	}}
	for _, o := range s.ENIs {
		if o.SubnetID == a.SubnetID {
			e.SubnetCIDR = o.SubnetCIDR
		}
	}
	e.Blocks = next.blocks(a.Count, a.Prefixes)
	s.ENIs = append(s.ENIs, e)
	return nil
}

// addrCursor hands out IPv4 addresses above every address in a
// snapshot, as 32-bit numbers.
type addrCursor struct{ next uint32 }

func newAddrCursor(s Snapshot) *addrCursor {
	c := &addrCursor{next: 10<<24 | 16} // 10.0.0.16
	see := func(last uint32) { c.next = max(c.next, last+1) }
	for _, e := range s.ENIs {
		if e.PrimaryIP.Is4() {
			see(addrNum(e.PrimaryIP))
		}
		for _, b := range e.Blocks {
			if b.Prefix.Addr().Is4() {
				see(addrNum(b.Prefix.Masked().Addr()) | (1<<(32-b.Prefix.Bits()) - 1))
			}
		}
	}
	return c
}

// blocks returns n new free /32 blocks, or /28 prefixes aligned on 16.
func (c *addrCursor) blocks(n int, prefixes bool) []BlockState {
	bits, size := 32, uint32(1)
	if prefixes {
		bits, size = PrefixBits, PrefixAddrs
	}
	out := make([]BlockState, n)
	for i := range out {
		c.next = (c.next + size - 1) &^ (size - 1)
		a := netip.AddrFrom4([4]byte{byte(c.next >> 24), byte(c.next >> 16), byte(c.next >> 8), byte(c.next)})
		out[i] = BlockState{Prefix: netip.PrefixFrom(a, bits), Free: int(size)}
		c.next += size
	}
	return out
}

func addrNum(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
