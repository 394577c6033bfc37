package sim

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

var test64 = netip.MustParsePrefix("2600:1f14:abc:de01::/64")

func TestPool6NeverHandsOutReservedAddresses(t *testing.T) {
	for _, rng := range []*rand.Rand{nil, rand.New(rand.NewPCG(1, 2))} {
		p := newPool6(test64, rng)
		for _, off := range []uint64{0, 1, 2, 3, ^uint64(0)} {
			if a := p.addrAt(off); p.isFree(a) || !p.reserved(a) {
				t.Errorf("reserved %s is free", a)
			}
		}
		for _, a := range p.takeAny(1000) {
			if p.reserved(a) || !test64.Contains(a) {
				t.Fatalf("handed out %s", a)
			}
		}
		if len(p.addrs) != 1000 {
			t.Errorf("%d addresses taken, want 1000 distinct", len(p.addrs))
		}
	}
	for _, q := range []netip.Prefix{netip.MustParsePrefix("2600:1f14:abc:de01::/80"), netip.MustParsePrefix("2600:1f14:abc:de01:ffff::/80")} {
		if newPool6(test64, nil).prefixFree(q) {
			t.Errorf("%s covers a reserved address but is free", q)
		}
	}
}

func TestPool6APrefixNeverCoversATakenAddress(t *testing.T) {
	p := newPool6(test64, nil)
	a := netip.MustParseAddr("2600:1f14:abc:de01:7::1")
	p.take(a)
	q := block80(a)
	if p.prefixFree(q) {
		t.Fatalf("%s holds taken %s but is free", q, a)
	}
	got, ok := p.takeAnyPrefixes(10)
	if !ok || slices.Contains(got, q) {
		t.Errorf("takeAnyPrefixes = %v, %v; want 10 avoiding %s", got, ok, q)
	}
	// A delegated /80's addresses are taken too.
	if p.isFree(got[0].Addr().Next()) {
		t.Errorf("an address inside delegated %s is free", got[0])
	}
	p.release(a)
	if !p.prefixFree(q) {
		t.Errorf("%s is not free once its only address is released", q)
	}
	// Sequential addresses skip a delegated /80.
	p2 := newPool6(netip.MustParsePrefix("2600:1f14:abc:de02::/64"), nil)
	p2.takePrefix(p2.blockAt(0)) // only possible by hand: it holds reserved addresses
	if a := p2.takeAny(1)[0]; a != p2.addrAt(1<<48) {
		t.Errorf("first address after a delegated /80 = %s, want %s", a, p2.addrAt(1<<48))
	}
}

func TestPool6RandomOrderIsSeeded(t *testing.T) {
	draw := func(seed uint64) ([]netip.Addr, []netip.Prefix) {
		p := newPool6(test64, rand.New(rand.NewPCG(seed, 0)))
		qs, _ := p.takeAnyPrefixes(3)
		return p.takeAny(3), qs
	}
	a1, q1 := draw(7)
	a2, q2 := draw(7)
	a3, _ := draw(8)
	if !slices.Equal(a1, a2) || !slices.Equal(q1, q2) {
		t.Errorf("same seed, different draws: %v %v / %v %v", a1, q1, a2, q2)
	}
	if slices.Equal(a1, a3) {
		t.Errorf("different seeds, same draws: %v", a1)
	}
}

func TestPool6ReleaseOfAFreeAddressPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("releasing a free address did not panic")
		}
	}()
	newPool6(test64, nil).release(netip.MustParseAddr("2600:1f14:abc:de01::9"))
}
