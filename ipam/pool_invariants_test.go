package ipam

import "fmt"

// checkInvariants recomputes everything the pool keeps incrementally and
// reports the first disagreement. The property test calls it after every
// step.
func (p *Pool) checkInvariants() error {
	var assigned, cooling, free int
	for i, e := range p.order {
		if p.enis[e.ID] != e {
			return fmt.Errorf("eni %s in order but not in the id map", e.ID)
		}
		if i > 0 && p.order[i-1].DeviceIndex >= e.DeviceIndex {
			return fmt.Errorf("ENIs out of device-index order at %s", e.ID)
		}
		if err := p.checkENI(e); err != nil {
			return err
		}
		assigned += e.assigned
		cooling += e.cooling
		free += e.free
	}
	if len(p.order) != len(p.enis) {
		return fmt.Errorf("%d ENIs in order, %d in the id map", len(p.order), len(p.enis))
	}
	if assigned != p.assigned || cooling != p.nCooling || free != p.free {
		return fmt.Errorf("node counters %d/%d/%d, blocks say %d/%d/%d (assigned/cooling/free)",
			p.assigned, p.nCooling, p.free, assigned, cooling, free)
	}
	if len(p.owners) != p.assigned {
		return fmt.Errorf("%d owners for %d assigned addresses", len(p.owners), p.assigned)
	}
	for k, r := range p.owners {
		if !r.b.isAssigned(r.i) || r.b.slotAt(r.i).key != k || p.blocks[r.b.prefix] != r.b {
			return fmt.Errorf("owner %s points at %s, which it does not hold", k, r.b.addr(r.i))
		}
	}
	if err := checkHeap(&p.withFree); err != nil {
		return fmt.Errorf("node heap: %w", err)
	}
	return p.checkCooling()
}

func (p *Pool) checkENI(e *eniEntry) error {
	var assigned, cooling, free int
	for j, b := range e.blocks {
		if j > 0 && !e.blocks[j-1].prefix.Addr().Less(b.prefix.Addr()) {
			return fmt.Errorf("eni %s: blocks out of address order at %s", e.ID, b.prefix)
		}
		if p.blocks[b.prefix] != b || b.eni != e {
			return fmt.Errorf("block %s: not indexed, or indexed under another ENI", b.prefix)
		}
		if b.wide != nil {
			if err := p.checkWide(b); err != nil {
				return err
			}
			assigned += b.nAssigned()
			cooling += b.nCooling()
			free += b.nFree()
			continue
		}
		mask := uint32(1)<<b.size() - 1
		if b.free&b.cooling != 0 || (b.free|b.cooling)&^mask != 0 {
			return fmt.Errorf("block %s: bitmaps free %b cooling %b", b.prefix, b.free, b.cooling)
		}
		if (b.heapIdx >= 0) != (b.free != 0) {
			return fmt.Errorf("block %s: %d free but heap index %d", b.prefix, b.nFree(), b.heapIdx)
		}
		for _, o := range p.order {
			if b.prefix.Contains(o.PrimaryIP) {
				return fmt.Errorf("block %s holds the primary address of %s", b.prefix, o.ID)
			}
		}
		for i := range b.slots {
			if b.isAssigned(i) && p.owners[b.slots[i].key] != (addrRef{b, i}) {
				return fmt.Errorf("%s assigned to %s, whose owner entry differs", b.addr(i), b.slots[i].key)
			}
		}
		assigned += b.nAssigned()
		cooling += b.nCooling()
		free += b.nFree()
	}
	if assigned != e.assigned || cooling != e.cooling || free != e.free {
		return fmt.Errorf("eni %s counters %d/%d/%d, blocks say %d/%d/%d", e.ID, e.assigned, e.cooling, e.free, assigned, cooling, free)
	}
	if (e.heapIdx >= 0) != (e.free > 0) {
		return fmt.Errorf("eni %s: %d free but heap index %d", e.ID, e.free, e.heapIdx)
	}
	return checkHeap(&e.withFree)
}

func (p *Pool) checkCooling() error {
	q := &p.cooling
	if q.len() != p.nCooling {
		return fmt.Errorf("%d queued cooldowns for %d cooling addresses", q.len(), p.nCooling)
	}
	for k, c := range q.items[q.head:] {
		if k > 0 && q.items[q.head+k-1].until.After(c.until) {
			return fmt.Errorf("cooldown queue out of order at %s", c.ref.b.addr(c.ref.i))
		}
		if !c.ref.b.isCooling(c.ref.i) || !c.ref.b.slotAt(c.ref.i).until.Equal(c.until) {
			return fmt.Errorf("queued %s is not cooling until %v", c.ref.b.addr(c.ref.i), c.until)
		}
		if !c.until.After(p.clock) {
			return fmt.Errorf("%s still cooling at %v, past its end %v", c.ref.b.addr(c.ref.i), p.clock, c.until)
		}
		if p.blocks[c.ref.b.prefix] != c.ref.b {
			return fmt.Errorf("queued %s belongs to a removed block", c.ref.b.addr(c.ref.i))
		}
	}
	return nil
}

func checkHeap[T any](h *indexedHeap[T]) error {
	for i, x := range h.items {
		if *h.index(x) != i {
			return fmt.Errorf("element at %d records index %d", i, *h.index(x))
		}
		if i > 0 && h.less(x, h.items[(i-1)/2]) {
			return fmt.Errorf("element at %d is less than its parent", i)
		}
	}
	return nil
}

// checkWide is checkENI's per-block part for a /80.
func (p *Pool) checkWide(b *block) error {
	for i := range b.wide.cooling {
		if _, used := b.wide.used[i]; !used {
			return fmt.Errorf("block %s: offset %d cooling but not used", b.prefix, i)
		}
	}
	for i, s := range b.wide.used {
		if i < 0 || i >= wideSize {
			return fmt.Errorf("block %s: offset %d outside the /80", b.prefix, i)
		}
		if b.isAssigned(i) && p.owners[s.key] != (addrRef{b, i}) {
			return fmt.Errorf("%s assigned to %s, whose owner entry differs", b.addr(i), s.key)
		}
		if b.offset(b.addr(i)) != i || !b.prefix.Contains(b.addr(i)) {
			return fmt.Errorf("block %s: offset %d maps to %s and back to %d", b.prefix, i, b.addr(i), b.offset(b.addr(i)))
		}
	}
	if (b.heapIdx >= 0) != (b.nFree() > 0) {
		return fmt.Errorf("block %s: %d free but heap index %d", b.prefix, b.nFree(), b.heapIdx)
	}
	return nil
}
