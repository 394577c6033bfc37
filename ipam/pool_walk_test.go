package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"time"
)

// The walk's world is small so that collisions are common: six ENI ids
// and device indexes, three subnets (one a single /28), forty keys.
var walkSubnets = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/25"),
	netip.MustParsePrefix("10.0.1.0/25"),
	netip.MustParsePrefix("10.0.2.0/28"),
}

// The walk alternates between growing phases, where pods arrive, and
// shrinking ones, where they leave and ENIs and blocks are given back, so
// that removals succeed as well as fail and the node fills and empties.
var (
	// clock, assign, unassign, addBlock, removeBlock, addENI, removeENI,
	// restore, restoreCooldown, snapshot
	growOps   = []int{15, 30, 12, 12, 6, 5, 2, 5, 3, 5}
	shrinkOps = []int{15, 8, 35, 4, 15, 2, 8, 3, 3, 5}
)

func (w *walk) randomOp() {
	if w.step%300 == 0 {
		w.shrinking = w.rng.IntN(2) == 0
	}
	weights := growOps
	if w.shrinking {
		weights = shrinkOps
	}
	ops := []func(){w.moveClock, w.assign, w.unassign, w.addBlock, w.removeBlock,
		w.addENI, w.removeENI, w.restore, w.restoreCooldown, w.snapshot}
	total := 0
	for _, wt := range weights {
		total += wt
	}
	n := w.rng.IntN(total)
	for i, wt := range weights {
		if n < wt {
			ops[i]()
			return
		}
		n -= wt
	}
	panic("unreachable")
}

func (w *walk) moveClock() {
	var d time.Duration
	switch n := w.rng.IntN(100); {
	case n < 30: // standing still
	case n < 70:
		d = time.Duration(1+w.rng.IntN(10)) * time.Second
	case n < 92: // around the cooldown
		d = time.Duration(20+w.rng.IntN(21)) * time.Second
	default: // backwards
		d = -time.Duration(1+w.rng.IntN(40)) * time.Second
	}
	w.now = w.now.Add(d)
	w.log("clock %+v", d)
}

func (w *walk) key() Key {
	return Key{Network: "vpcnet", ContainerID: fmt.Sprintf("c%d", w.rng.IntN(40)), IfName: "eth0"}
}

func (w *walk) eniID() string { return fmt.Sprintf("eni-%d", w.rng.IntN(6)) }

func (w *walk) addrIn(subnet netip.Prefix, span int) netip.Addr {
	a := subnet.Addr()
	for range w.rng.IntN(min(span, 1<<(32-subnet.Bits()))) {
		a = a.Next()
	}
	return a
}

// knownAddr returns an address on the node most of the time, otherwise one
// that may or may not be.
func (w *walk) knownAddr() netip.Addr {
	var addrs []netip.Addr
	for a := range w.m.addrs {
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 || w.rng.IntN(4) == 0 {
		return w.addrIn(walkSubnets[w.rng.IntN(len(walkSubnets))], 64)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs[w.rng.IntN(len(addrs))]
}

func (w *walk) addENI() {
	id := w.eniID()
	// Mostly the device index matching the id, so that an ENI can come
	// back after removal; sometimes any, to collide.
	dev := int(id[len(id)-1] - '0')
	if w.rng.IntN(5) == 0 {
		dev = w.rng.IntN(6)
	}
	subnet := walkSubnets[w.rng.IntN(len(walkSubnets))]
	e := ENI{
		ID:          id,
		DeviceIndex: dev,
		Primary:     dev == 0,
		SubnetCIDR:  subnet,
		PrimaryIP:   w.addrIn(subnet, 48),
	}
	w.log("AddENI %s dev %d %s primary %s", e.ID, dev, subnet, e.PrimaryIP)
	w.expect(w.m.addENI(e), w.p.AddENI(e))
}

func (w *walk) removeENI() {
	id := w.eniID()
	w.log("RemoveENI %s", id)
	w.expect(w.m.removeENI(id, w.now), w.p.RemoveENI(id, w.now))
}

func (w *walk) addBlock() {
	id := w.eniID()
	subnet := walkSubnets[w.rng.IntN(len(walkSubnets))]
	if e, ok := w.m.enis[id]; ok && w.rng.IntN(3) > 0 {
		subnet = e.SubnetCIDR
	}
	var b netip.Prefix
	switch n := w.rng.IntN(100); {
	case n < 3:
		b = netip.PrefixFrom(subnet.Addr(), 30)
	case n < 45:
		b, _ = w.addrIn(subnet, 64).Prefix(28)
	default:
		b = netip.PrefixFrom(w.addrIn(subnet, 64), 32)
	}
	w.log("AddBlock %s %s", id, b)
	w.expect(w.m.addBlock(id, b), w.p.AddBlock(id, b))
}

func (w *walk) removeBlock() {
	var blocks []netip.Prefix
	for b := range w.m.blocks {
		blocks = append(blocks, b)
	}
	slices.SortFunc(blocks, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
	b := netip.PrefixFrom(w.knownAddr(), 32)
	if len(blocks) > 0 && w.rng.IntN(5) > 0 {
		b = blocks[w.rng.IntN(len(blocks))]
	}
	w.log("RemoveBlock %s", b)
	w.expect(w.m.removeBlock(b, w.now), w.p.RemoveBlock(b, w.now))
}

func (w *walk) assign() {
	k := w.key()
	prev, had := w.p.Lookup(k)
	got, err := w.p.Assign(k, Pod{Name: k.ContainerID}, w.now)
	w.log("Assign %s -> %s %v", k.ContainerID, got.Addr, err)
	w.count(err)
	w.m.tick(w.now)
	if err == nil {
		if a, ok := w.m.addrs[got.Addr]; ok && w.m.cooling(a) {
			w.fail("handed out %s while it cools down until %v (clock %v)", got.Addr, a.until, w.m.clock)
		}
	}
	want := w.m.assign(k, w.now)
	switch {
	case !want.IsValid():
		var nf *NoFreeAddressError
		if !errors.As(err, &nf) {
			w.fail("Assign %s: got %s, %v; want no free address", k, got.Addr, err)
		}
	case err != nil || got.Addr != want:
		w.fail("Assign %s: got %s, %v; want %s", k, got.Addr, err, want)
	case had && got != prev:
		w.fail("repeated Assign %s: got %+v, want the first %+v", k, got, prev)
	}
}

func (w *walk) unassign() {
	k := w.key()
	got, released := w.p.Unassign(k, w.now)
	w.log("Unassign %s -> %s %v", k.ContainerID, got.Addr, released)
	want, ok := w.m.unassign(k, w.now)
	if released != ok || got.Addr != want {
		w.fail("Unassign %s: got %s %v, want %s %v", k, got.Addr, released, want, ok)
	}
}

func (w *walk) restore() {
	k, addr := w.key(), w.knownAddr()
	w.log("Restore %s %s", k.ContainerID, addr)
	_, err := w.p.Restore(k, Pod{}, addr, w.now.Add(-time.Hour))
	w.expect(w.m.restore(k, addr), err)
}

func (w *walk) restoreCooldown() {
	addr := w.knownAddr()
	freedAt := w.now.Add(-time.Duration(w.rng.IntN(60)) * time.Second)
	w.log("RestoreCooldown %s freed %s", addr, freedAt.Format("15:04:05"))
	w.expect(w.m.restoreCooldown(addr, freedAt), w.p.RestoreCooldown(addr, freedAt))
}

func (w *walk) snapshot() {
	w.log("Snapshot")
	got := w.p.Snapshot(w.now)
	w.m.tick(w.now)
	s := w.m.stats()
	if len(got.ENIs) != len(s.ENIs) || got.Waiting != 0 {
		w.fail("snapshot has %d ENIs, waiting %d; want %d, 0", len(got.ENIs), got.Waiting, len(s.ENIs))
	}
	for i, e := range got.ENIs {
		if !reflect.DeepEqual(e.ENI, w.m.enis[s.ENIs[i].ID]) || !reflect.DeepEqual(e.Blocks, s.ENIs[i].Blocks) {
			w.fail("snapshot ENI %d = %+v, want %+v with blocks %+v", i, e, w.m.enis[s.ENIs[i].ID], s.ENIs[i].Blocks)
		}
	}
}
