package ipam

import (
	"fmt"
	"slices"
)

// detachWhole plans detaching ENIs whose addresses are all free, highest
// device index first, while their blocks fit in budget (see
// surplusBlocks), and returns what is left of it. An ENI with no blocks
// costs nothing, so it goes whenever the pool is not short.
func (p *planner) detachWhole(budget int) int {
	if budget < 0 {
		return budget
	}
	for i := len(p.enis) - 1; i >= 0; i-- {
		e := &p.enis[i]
		if !p.detachable(e) || e.kindBlocks > budget {
			continue
		}
		e.detach = true
		if e.kindBlocks == 0 {
			e.detachReason = "the ENI holds no addresses the pool uses; its attachment slot goes back to the instance"
		} else {
			e.detachReason = fmt.Sprintf("%s; all %s on it are free, it is older than the %v grace period, and the pool meets its target without it",
				p.reason(), plural(e.kindBlocks*p.blockSize, "address", "addresses"), p.cfg.ENIGracePeriod)
		}
		budget -= e.kindBlocks
		p.addBlocks(-e.kindBlocks)
		p.attached--
	}
	return budget
}

// releaseBlocks plans releasing up to budget entirely free blocks, from
// the highest device index down, so pods drain off the ENIs most likely to
// empty out and be detached later.
func (p *planner) releaseBlocks(budget int) {
	for i := len(p.enis) - 1; i >= 0 && budget > 0; i-- {
		e := &p.enis[i]
		if e.detach {
			continue
		}
		bl := e.st.Blocks
		for j := len(bl) - 1; j >= 0 && budget > 0; j-- {
			b := bl[j]
			if b.Prefix.Bits() == p.blockBits && b.Assigned == 0 && b.Cooling == 0 {
				e.release = append(e.release, b.Prefix)
				budget--
			}
		}
		slices.Reverse(e.release)
		p.addBlocks(-len(e.release))
	}
}
