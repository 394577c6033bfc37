package sim

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

func TestPoolNeverHandsOutReservedAddresses(t *testing.T) {
	for _, cidr := range []string{"10.0.0.0/28", "10.0.0.0/24", "10.0.16.0/20"} {
		t.Run(cidr, func(t *testing.T) {
			p := newPool(netip.MustParsePrefix(cidr), nil)
			size := 1 << (32 - p.cidr.Bits())
			if p.free != size-5 {
				t.Fatalf("free = %d, want %d", p.free, size-5)
			}
			got, ok := p.takeAny(p.free)
			if !ok {
				t.Fatal("could not take every free address")
			}
			for _, a := range got {
				if off := p.offset(a); off <= 3 || off == size-1 {
					t.Errorf("handed out reserved %s", a)
				}
			}
			if _, ok := p.takeAny(1); ok {
				t.Error("took an address from a full pool")
			}
		})
	}
}

func TestPoolTakeAnyIsAllOrNothing(t *testing.T) {
	p := newPool(netip.MustParsePrefix("10.0.0.0/28"), nil)
	if _, ok := p.takeAny(12); ok {
		t.Fatal("took 12 of 11")
	}
	if p.free != 11 {
		t.Errorf("a failed take changed free to %d", p.free)
	}
}

func TestPoolPrefixes(t *testing.T) {
	p := newPool(netip.MustParsePrefix("10.0.0.0/26"), nil) // 4 blocks; the first and last hold reserved addresses
	got, ok := p.takeAnyPrefixes(2)
	if !ok {
		t.Fatal("no prefixes in a fresh /26")
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.16/28"), netip.MustParsePrefix("10.0.0.32/28")}
	if !slices.Equal(got, want) {
		t.Errorf("took %v, want %v", got, want)
	}
	if _, ok := p.takeAnyPrefixes(1); ok {
		t.Error("took a /28 that overlaps reserved addresses")
	}
	if p.free != 64-5-32 {
		t.Errorf("free = %d after two /28s", p.free)
	}
	p.releasePrefix(want[0])
	p.take(netip.MustParseAddr("10.0.0.20"))
	if _, ok := p.takeAnyPrefixes(1); ok {
		t.Error("took a /28 holding a used address")
	}
	if p.prefixFree(netip.MustParsePrefix("10.0.0.8/28")) {
		t.Error("a misaligned /28 counts as free")
	}
}

func TestPoolRandomOrderIsSeeded(t *testing.T) {
	take := func(seed uint64) []netip.Addr {
		p := newPool(netip.MustParsePrefix("10.0.0.0/24"), rand.New(rand.NewPCG(seed, 1)))
		got, _ := p.takeAny(20)
		return got
	}
	a, b, c := take(1), take(1), take(2)
	if !slices.Equal(a, b) {
		t.Error("same seed, different addresses")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same addresses")
	}
	if slices.IsSortedFunc(a, func(x, y netip.Addr) int { return x.Compare(y) }) {
		t.Error("random order handed out addresses in ascending order")
	}
}

func TestPoolReleaseOfAFreeAddressPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("releasing a free address did not panic")
		}
	}()
	newPool(netip.MustParsePrefix("10.0.0.0/24"), nil).release(netip.MustParseAddr("10.0.0.9"))
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"i-node*", "i-node1", true},
		{"i-node*", "i-nod", false},
		{"*", "", true},
		{"10.0.?.5", "10.0.1.5", true},
		{"10.0.?.5", "10.0.12.5", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}
