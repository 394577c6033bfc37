package ipam

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

var (
	v6T0      = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	v6Subnet  = netip.MustParsePrefix("2600:1f14:abc:de01::/64")
	v6Prefix  = netip.MustParsePrefix("2600:1f14:abc:de01:12::/80")
	v6Primary = ENI{ID: "eni-a", DeviceIndex: 0, Primary: true, SubnetID: "subnet-a",
		SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"), SubnetIPv6CIDR: v6Subnet,
		PrimaryIP: netip.MustParseAddr("10.0.0.10"), CreatedAt: v6T0}
)

func v6Key(i int) Key {
	return Key{Network: "aws-cni", ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0"}
}

func v6Pool(t *testing.T, cooldown time.Duration) *Pool {
	t.Helper()
	p := NewPool(cooldown)
	if err := p.AddENI(v6Primary); err != nil {
		t.Fatal(err)
	}
	if err := p.AddBlock("eni-a", v6Prefix); err != nil {
		t.Fatal(err)
	}
	return p
}

// A /80 gives pods its addresses lowest first from its first address, as
// aws-node's IPv6 mode does, and a freed one only after its cooldown.
func TestIPv6PrefixGivesLowestAddressesFirstAndCoolsFreedOnes(t *testing.T) {
	p := v6Pool(t, 30*time.Second)
	for i, want := range []string{"2600:1f14:abc:de01:12::", "2600:1f14:abc:de01:12::1", "2600:1f14:abc:de01:12::2"} {
		a, err := p.Assign(v6Key(i), Pod{}, v6T0)
		if err != nil {
			t.Fatal(err)
		}
		if a.Addr != netip.MustParseAddr(want) || a.Block != v6Prefix || a.ENIID != "eni-a" {
			t.Fatalf("Assign #%d = %+v, want %s from %s", i, a, want, v6Prefix)
		}
	}
	if _, ok := p.Unassign(v6Key(0), v6T0); !ok {
		t.Fatal("Unassign found nothing")
	}
	a, _ := p.Assign(v6Key(3), Pod{}, v6T0.Add(time.Second))
	if a.Addr != netip.MustParseAddr("2600:1f14:abc:de01:12::3") {
		t.Fatalf("during the cooldown Assign = %s, want the next unused address", a.Addr)
	}
	a, _ = p.Assign(v6Key(4), Pod{}, v6T0.Add(31*time.Second))
	if a.Addr != netip.MustParseAddr("2600:1f14:abc:de01:12::") {
		t.Fatalf("after the cooldown Assign = %s, want the first address again", a.Addr)
	}
	if err := p.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats(v6T0.Add(time.Minute))
	if st.Assigned != 4 || st.Free != wideSize-4 {
		t.Errorf("stats %+v, want 4 assigned and the rest of 2^48 free", st)
	}
}

func TestIPv6PrefixOutsideTheENIsIPv6SubnetIsRefused(t *testing.T) {
	p := NewPool(0)
	noV6 := v6Primary
	noV6.SubnetIPv6CIDR = netip.Prefix{}
	if err := p.AddENI(noV6); err != nil {
		t.Fatal(err)
	}
	var out *BlockOutsideSubnetError
	if err := p.AddBlock("eni-a", v6Prefix); !errors.As(err, &out) {
		t.Fatalf("AddBlock of a /80 on an ENI without an IPv6 subnet = %v, want a *BlockOutsideSubnetError", err)
	}
	p = v6Pool(t, 0)
	for _, bad := range []string{"2600:1f14:abc:de01::/64", "2600:1f14:abc:de01:12:0:3::/96", "2600:1f14:abc:ffff:12::/80", "2600:1f14:abc:de01:12::/80", "2600:1f14:abc:de01:12::1/80"} {
		if err := p.AddBlock("eni-a", netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("AddBlock(%s) accepted", bad)
		}
	}
}

// What the checkpoint and the host say about IPv6 addresses restores and
// seizes exactly as for IPv4, and a /80 in use is never removed.
func TestIPv6RestoreSeizeAndRemoveFollowTheIPv4Rules(t *testing.T) {
	p := v6Pool(t, 30*time.Second)
	far := netip.MustParseAddr("2600:1f14:abc:de01:12:0:ffff:fffe")
	if _, err := p.Restore(v6Key(1), Pod{Namespace: "ns", Name: "a"}, far, v6T0); err != nil {
		t.Fatal(err)
	}
	if a, ok := p.LookupAddr(far); !ok || a.Key != v6Key(1) {
		t.Fatalf("LookupAddr(%s) = %+v, %v", far, a, ok)
	}
	var held *AddrHeldError
	if _, err := p.Restore(v6Key(2), Pod{}, far, v6T0); !errors.As(err, &held) {
		t.Fatalf("a second Restore of %s = %v, want *AddrHeldError", far, err)
	}
	var notOn *AddrNotOnNodeError
	if _, err := p.Restore(v6Key(3), Pod{}, netip.MustParseAddr("2600:1f14:abc:de01:9::1"), v6T0); !errors.As(err, &notOn) {
		t.Fatalf("Restore outside the /80 = %v, want *AddrNotOnNodeError", err)
	}
	var inUse *InUseError
	if err := p.RemoveBlock(v6Prefix, v6T0); !errors.As(err, &inUse) {
		t.Fatalf("RemoveBlock of a /80 in use = %v, want *InUseError", err)
	}
	p.Unassign(v6Key(1), v6T0)
	if !p.IsCooling(far) {
		t.Fatal("a freed IPv6 address does not cool")
	}
	if _, err := p.Seize(v6Key(4), far, v6T0); err != nil {
		t.Fatalf("Seize of a cooling IPv6 address the host routes: %v", err)
	}
	if err := p.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Random Assign, Unassign and time steps on a /80 keep every counter the
// pool holds incrementally equal to what its blocks say.
func TestIPv6PoolKeepsItsInvariantsUnderRandomUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := v6Pool(t, 5*time.Second)
	now := v6T0
	held := map[Key]netip.Addr{}
	for step := range 3000 {
		k := v6Key(rng.IntN(300))
		switch rng.IntN(3) {
		case 0:
			a, err := p.Assign(k, Pod{}, now)
			if err != nil {
				t.Fatal(err)
			}
			if old, ok := held[k]; ok && old != a.Addr {
				t.Fatalf("step %d: %s moved from %s to %s", step, k, old, a.Addr)
			}
			for other, addr := range held {
				if other != k && addr == a.Addr {
					t.Fatalf("step %d: %s given to %s and %s", step, addr, k, other)
				}
			}
			held[k] = a.Addr
		case 1:
			p.Unassign(k, now)
			delete(held, k)
		default:
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		if err := p.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
