package ipam

import "slices"

// grow plans want more blocks: on existing ENIs first, lowest device
// index first, then on new ENIs, never past max pods or the ENI limit. In
// modeENIs want counts addresses and every ENI touched is filled to
// capacity, as aws-node does. It returns the shortfall when a limit stops
// it.
func (p *planner) grow(want int) Shortfall {
	fill := p.mode == modeENIs
	// Blocks max pods still has use for: never a whole block past it.
	room := ceilDiv(max(p.maxPods-p.total, 0), p.blockSize)
	take := func(slots int) int {
		n := slots
		if !fill {
			n = min(n, want)
		}
		return min(n, room)
	}
	for i := range p.enis {
		e := &p.enis[i]
		// With custom networking pods use only ENIs in SubnetID: never
		// the primary, nor an ENI left in another subnet from before.
		if p.cfg.CustomNetworking && (e.primary() || e.st.SubnetID != p.cfg.SubnetID) {
			continue
		}
		n := take(p.slots - e.slotsUsed)
		if n <= 0 {
			continue
		}
		e.assign = n
		p.addBlocks(n)
		room -= n
		if want -= n; want <= 0 {
			return Shortfall{}
		}
	}
	for p.attached < p.maxENIs {
		n := take(p.slots)
		if n <= 0 {
			break
		}
		p.attaches = append(p.attaches, Action{
			Kind:           AttachENI,
			Count:          n,
			Prefixes:       p.blockBits != 32,
			SubnetID:       p.cfg.SubnetID,
			SecurityGroups: slices.Clone(p.cfg.SecurityGroups),
			Reason:         p.reason() + "; every existing ENI is full",
		})
		p.attached++
		p.addBlocks(n)
		room -= n
		if want -= n; want <= 0 {
			return Shortfall{}
		}
	}
	short := Shortfall{Missing: want * p.blockSize, Limit: InstanceENILimit, Max: p.maxENIs}
	switch {
	case room <= 0:
		short.Limit, short.Max = MaxPodsLimit, p.maxPods
	case p.maxENIs < p.instENIs:
		short.Limit = MaxENILimit
	}
	return short
}
