package ipam

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"
)

// model is the pool written as plainly as possible, for the property test
// to check the real one against: maps and scans, no heaps, no bitmaps, no
// queue. A cooling address is one whose until lies after the clock; there is
// no draining.
type model struct {
	cooldown time.Duration
	clock    time.Time
	enis     map[string]ENI
	blocks   map[netip.Prefix]string // block -> ENI id
	addrs    map[netip.Addr]*modelAddr
	owners   map[Key]netip.Addr
}

type modelAddr struct {
	block netip.Prefix
	held  bool
	key   Key
	until time.Time // end of cooldown once released
}

func newModel(cooldown time.Duration) *model {
	return &model{
		cooldown: cooldown,
		enis:     map[string]ENI{},
		blocks:   map[netip.Prefix]string{},
		addrs:    map[netip.Addr]*modelAddr{},
		owners:   map[Key]netip.Addr{},
	}
}

func (m *model) tick(now time.Time) {
	if now.After(m.clock) {
		m.clock = now
	}
}

func (m *model) cooling(a *modelAddr) bool { return !a.held && a.until.After(m.clock) }
func (m *model) free(a *modelAddr) bool    { return !a.held && !m.cooling(a) }

func blockAddrs(b netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for a := b.Addr(); b.Contains(a); a = a.Next() {
		out = append(out, a)
	}
	return out
}

// addENI returns the names of the rules e breaks; the pool must refuse it
// for one of them, or accept it when there are none.
func (m *model) addENI(e ENI) []string {
	var why []string
	for _, o := range m.enis {
		if o.ID == e.ID || o.DeviceIndex == e.DeviceIndex {
			why = append(why, "*ipam.DuplicateENIError")
		}
		if o.PrimaryIP == e.PrimaryIP {
			why = append(why, "*ipam.InvalidENIError")
		}
	}
	if _, ok := m.addrs[e.PrimaryIP]; ok {
		why = append(why, "*ipam.PrimaryIPError")
	}
	if len(why) == 0 {
		m.enis[e.ID] = e
	}
	return why
}

func (m *model) removeENI(id string, now time.Time) []string {
	m.tick(now)
	e, ok := m.enis[id]
	if !ok {
		return []string{"*ipam.UnknownENIError"}
	}
	var why []string
	if e.Primary {
		why = append(why, "*ipam.PrimaryENIError")
	}
	for b, owner := range m.blocks {
		if owner == id && !m.blockFree(b) {
			why = append(why, "*ipam.InUseError")
		}
	}
	if len(why) > 0 {
		return why
	}
	for b, owner := range m.blocks {
		if owner == id {
			m.dropBlock(b)
		}
	}
	delete(m.enis, id)
	return nil
}

func (m *model) addBlock(id string, b netip.Prefix) []string {
	e, ok := m.enis[id]
	if !ok {
		return []string{"*ipam.UnknownENIError"}
	}
	if b.Bits() != 32 && b.Bits() != 28 {
		return []string{"*ipam.InvalidBlockError"}
	}
	var why []string
	if !e.SubnetCIDR.Contains(b.Addr()) || e.SubnetCIDR.Bits() > b.Bits() {
		why = append(why, "*ipam.BlockOutsideSubnetError")
	}
	for o := range m.blocks {
		if o.Overlaps(b) {
			why = append(why, "*ipam.OverlapError")
		}
	}
	for _, o := range m.enis {
		if b.Contains(o.PrimaryIP) {
			why = append(why, "*ipam.PrimaryIPError")
		}
	}
	if len(why) == 0 {
		m.blocks[b] = id
		for _, a := range blockAddrs(b) {
			m.addrs[a] = &modelAddr{block: b}
		}
	}
	return why
}

func (m *model) blockFree(b netip.Prefix) bool {
	for _, a := range blockAddrs(b) {
		if !m.free(m.addrs[a]) {
			return false
		}
	}
	return true
}

func (m *model) removeBlock(b netip.Prefix, now time.Time) []string {
	m.tick(now)
	if _, ok := m.blocks[b]; !ok {
		return []string{"*ipam.UnknownBlockError"}
	}
	if !m.blockFree(b) {
		return []string{"*ipam.InUseError"}
	}
	m.dropBlock(b)
	return nil
}

func (m *model) dropBlock(b netip.Prefix) {
	delete(m.blocks, b)
	for _, a := range blockAddrs(b) {
		delete(m.addrs, a)
	}
}

// assign returns the address the pool must hand out: key's own, or else by
// the packing rule written out longhand. It returns an invalid address when
// nothing is free.
func (m *model) assign(k Key, now time.Time) netip.Addr {
	m.tick(now)
	if a, ok := m.owners[k]; ok {
		return a
	}
	enis := slices.Collect(maps.Values(m.enis))
	slices.SortFunc(enis, func(x, y ENI) int { return cmp.Compare(x.DeviceIndex, y.DeviceIndex) })
	for _, e := range enis {
		var best netip.Prefix
		bestFree := 0
		for b, owner := range m.blocks {
			n := 0
			for _, a := range blockAddrs(b) {
				if m.free(m.addrs[a]) {
					n++
				}
			}
			if owner != e.ID || n == 0 {
				continue
			}
			if bestFree == 0 || n < bestFree || n == bestFree && b.Addr().Less(best.Addr()) {
				best, bestFree = b, n
			}
		}
		if bestFree == 0 {
			continue
		}
		for _, a := range blockAddrs(best) {
			if m.free(m.addrs[a]) {
				m.addrs[a].held, m.addrs[a].key = true, k
				m.owners[k] = a
				return a
			}
		}
	}
	return netip.Addr{}
}

func (m *model) unassign(k Key, now time.Time) (netip.Addr, bool) {
	m.tick(now)
	a, ok := m.owners[k]
	if !ok {
		return netip.Addr{}, false
	}
	delete(m.owners, k)
	*m.addrs[a] = modelAddr{block: m.addrs[a].block, until: m.clock.Add(m.cooldown)}
	return a, true
}

func (m *model) restore(k Key, addr netip.Addr) []string {
	if held, ok := m.owners[k]; ok {
		if held == addr {
			return nil
		}
		return []string{"*ipam.KeyConflictError"}
	}
	a, ok := m.addrs[addr]
	switch {
	case !ok:
		return []string{"*ipam.AddrNotOnNodeError"}
	case a.held:
		return []string{"*ipam.AddrHeldError"}
	case m.cooling(a):
		return []string{"*ipam.AddrCoolingError"}
	}
	a.held, a.key = true, k
	m.owners[k] = addr
	return nil
}

func (m *model) restoreCooldown(addr netip.Addr, freedAt time.Time) []string {
	a, ok := m.addrs[addr]
	switch {
	case !ok:
		return []string{"*ipam.AddrNotOnNodeError"}
	case a.held:
		return []string{"*ipam.AddrHeldError"}
	}
	if until := freedAt.Add(m.cooldown); until.After(m.clock) && until.After(a.until) {
		a.until = until
	}
	return nil
}

// stats counts the model from scratch, in the pool's Stats shape.
func (m *model) stats() Stats {
	var s Stats
	enis := slices.Collect(maps.Values(m.enis))
	slices.SortFunc(enis, func(x, y ENI) int { return cmp.Compare(x.DeviceIndex, y.DeviceIndex) })
	s.ENIs = make([]ENIStats, 0, len(enis))
	for _, e := range enis {
		es := ENIStats{ID: e.ID, DeviceIndex: e.DeviceIndex, Blocks: []BlockState{}}
		for b, owner := range m.blocks {
			if owner != e.ID {
				continue
			}
			bs := BlockState{Prefix: b}
			for _, addr := range blockAddrs(b) {
				a := m.addrs[addr]
				switch {
				case a.held:
					bs.Assigned++
				case m.cooling(a):
					bs.Cooling++
					if s.NextFree.IsZero() || a.until.Before(s.NextFree) {
						s.NextFree = a.until
					}
				default:
					bs.Free++
				}
			}
			es.Blocks = append(es.Blocks, bs)
			es.Assigned += bs.Assigned
			es.Cooling += bs.Cooling
			es.Free += bs.Free
		}
		slices.SortFunc(es.Blocks, func(x, y BlockState) int { return x.Prefix.Addr().Compare(y.Prefix.Addr()) })
		es.Total = es.Assigned + es.Cooling + es.Free
		s.Assigned += es.Assigned
		s.Cooling += es.Cooling
		s.Free += es.Free
		s.ENIs = append(s.ENIs, es)
	}
	s.Total = s.Assigned + s.Cooling + s.Free
	return s
}
