package ipam

import (
	"fmt"
	"strings"
	"time"
)

// Stats counts the pool's addresses at one instant. On the node and on
// each ENI, Assigned+Cooling+Free equals Total.
type Stats struct {
	Total, Assigned, Cooling, Free int
	// NextFree is when the first cooling address comes free; zero when
	// nothing is cooling down.
	NextFree time.Time
	ENIs     []ENIStats // by device index
}

// ENIStats counts one ENI's addresses, and each of its blocks by address.
type ENIStats struct {
	ID                             string
	DeviceIndex                    int
	Total, Assigned, Cooling, Free int
	Blocks                         []BlockState
}

// String summarises the counts, e.g. "14 assigned, 2 cooling (first free
// at 2025-01-02T03:04:05Z), 0 free on 2 ENIs".
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d assigned, %d cooling", s.Assigned, s.Cooling)
	if s.Cooling > 0 {
		fmt.Fprintf(&b, " (first free at %s)", s.NextFree.UTC().Format(time.RFC3339))
	}
	enis := "ENIs"
	if len(s.ENIs) == 1 {
		enis = "ENI"
	}
	fmt.Fprintf(&b, ", %d free on %d %s", s.Free, len(s.ENIs), enis)
	return b.String()
}

// Total is how many addresses the pool holds, assigned, cooling or free.
func (p *Pool) Total() int { return p.assigned + p.nCooling + p.free }

// Stats returns the pool's counts at now, after freeing every address
// whose cooldown has ended.
func (p *Pool) Stats(now time.Time) Stats {
	p.advance(now)
	return p.stats()
}

func (p *Pool) stats() Stats {
	s := Stats{
		Total:    p.assigned + p.nCooling + p.free,
		Assigned: p.assigned,
		Cooling:  p.nCooling,
		Free:     p.free,
		ENIs:     make([]ENIStats, len(p.order)),
	}
	if c, ok := p.cooling.peek(); ok {
		s.NextFree = c.until
	}
	for i, e := range p.order {
		es := ENIStats{
			ID:          e.ID,
			DeviceIndex: e.DeviceIndex,
			Total:       e.assigned + e.cooling + e.free,
			Assigned:    e.assigned,
			Cooling:     e.cooling,
			Free:        e.free,
			Blocks:      make([]BlockState, len(e.blocks)),
		}
		for j, b := range e.blocks {
			es.Blocks[j] = b.state()
		}
		s.ENIs[i] = es
	}
	return s
}

// Snapshot returns the planner's view of the pool at now: ENIs by device
// index, each with its blocks by address. Waiting is left zero; the agent,
// which sees blocked requests, fills it in.
func (p *Pool) Snapshot(now time.Time) Snapshot {
	p.advance(now)
	s := Snapshot{ENIs: make([]ENIState, len(p.order))}
	for i, e := range p.order {
		st := ENIState{ENI: e.clone(), Blocks: make([]BlockState, len(e.blocks))}
		for j, b := range e.blocks {
			st.Blocks[j] = b.state()
		}
		s.ENIs[i] = st
	}
	return s
}
