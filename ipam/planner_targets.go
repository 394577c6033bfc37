package ipam

import (
	"fmt"
	"strings"
)

// The targets, with aws-node's meanings (pkg/ipamd/ipamd.go:
// isDatastorePoolTooLow, datastoreTargetState, getPrefixesNeeded,
// computeExtraPrefixesOverWarmTarget; datastore getDeletableENI). Two
// deliberate differences, both toward safety: a cooling address is not
// available (aws-node counts it available, so it may not grow while every
// free address is still cooling), and Waiting Add requests are demand on
// top of every target.
//
// Each mode has a "need": growth brings the pool up to it, and shrinking
// never takes the pool below it. Growth stops at most one block (one ENI
// in modeENIs) past it, shrinking stays at or above it, so a pass never
// undoes the one before.

// needAvail is how many addresses must be available in modeENIs and
// modePrefixes. At least one: with a target of 0 aws-node still grows
// when nothing at all is available.
func (p *planner) needAvail() int {
	n := p.waiting
	switch p.mode {
	case modeENIs:
		n += p.cfg.WarmENITarget * p.slots
	case modePrefixes:
		n += p.cfg.WarmPrefixTarget * p.blockSize
	}
	return max(n, 1)
}

// growBlocks is how many blocks the pool is short. In modeENIs it counts
// addresses, and growth fills whole ENIs until they are covered.
func (p *planner) growBlocks() int {
	switch p.mode {
	case modeIPs:
		// short = max(warm − available, minimum − total), in whole blocks.
		short := max(p.cfg.WarmIPTarget+p.waiting-p.avail, p.cfg.MinimumIPTarget-p.total)
		return ceilDiv(max(short, 0), p.blockSize)
	case modePrefixes:
		need := p.needAvail()
		if p.avail >= need {
			return 0
		}
		// aws-node asks for max(1, WARM_PREFIX_TARGET − free prefixes);
		// the last term only matters when requests are waiting.
		return max(1, p.cfg.WarmPrefixTarget-p.freeBlocks, ceilDiv(need-p.avail, p.blockSize))
	default:
		return max(p.needAvail()-p.avail, 0)
	}
}

// surplusBlocks is how many entirely free blocks can leave the pool with
// every target still met; negative when the pool is short.
func (p *planner) surplusBlocks() int {
	switch p.mode {
	case modeIPs:
		// over = min(available − warm, total − minimum), in whole blocks.
		over := min(p.avail-p.cfg.WarmIPTarget-p.waiting, p.total-p.cfg.MinimumIPTarget)
		return floorDiv(over, p.blockSize)
	case modePrefixes:
		return min(p.freeBlocks-p.cfg.WarmPrefixTarget, floorDiv(p.avail-p.needAvail(), p.blockSize))
	default:
		return p.avail - p.needAvail()
	}
}

// describe states the target and the pool as found in the terms of the
// settings.
func (p *planner) describe() string {
	var b strings.Builder
	t := p.start
	switch p.mode {
	case modeIPs:
		fmt.Fprintf(&b, "WARM_IP_TARGET=%d MINIMUM_IP_TARGET=%d: %d of %d addresses available",
			p.cfg.WarmIPTarget, p.cfg.MinimumIPTarget, t.avail, t.total)
	case modePrefixes:
		fmt.Fprintf(&b, "WARM_PREFIX_TARGET=%d: %d of %d prefixes free, %d addresses available",
			p.cfg.WarmPrefixTarget, t.freeBlocks, t.blocks, t.avail)
	default:
		fmt.Fprintf(&b, "WARM_ENI_TARGET=%d (%d addresses per ENI): %d of %d addresses available",
			p.cfg.WarmENITarget, p.slots, t.avail, t.total)
	}
	if w := p.waiting - p.expected; w > 0 {
		fmt.Fprintf(&b, ", %d Add requests waiting", w)
	}
	if p.expected > 0 {
		fmt.Fprintf(&b, ", about %d more expected soon (a guess)", p.expected)
	}
	return b.String()
}

func (p *planner) surplusReason(n int) string {
	return fmt.Sprintf("%s; %s over target", p.reason(), plural(n*p.blockSize, "address", "addresses"))
}

func (p *planner) foreignReason() string {
	if p.cfg.PrefixDelegation {
		return "ENABLE_PREFIX_DELEGATION=true: unused secondary addresses are given back"
	}
	return "ENABLE_PREFIX_DELEGATION=false: unused /28 prefixes are given back"
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// floorDiv rounds toward minus infinity, so a negative surplus stays
// negative.
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
