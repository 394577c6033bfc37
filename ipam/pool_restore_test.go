package ipam_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestRestore(t *testing.T) {
	tests := []struct {
		name    string
		key     ipam.Key
		addr    string
		wantErr any
	}{
		{"free address", poolKey("r1"), "10.0.1.40", nil},
		{"same key and address again", poolKey("held"), "10.0.1.32", nil},
		{"same key, other address", poolKey("held"), "10.0.1.40", new(*ipam.KeyConflictError)},
		{"address held by another key", poolKey("r1"), "10.0.1.32", new(*ipam.AddrHeldError)},
		{"address cooling down", poolKey("r1"), "10.0.1.33", new(*ipam.AddrCoolingError)},
		{"address in no block", poolKey("r1"), "10.0.1.99", new(*ipam.AddrNotOnNodeError)},
		{"eni primary address", poolKey("r1"), "10.0.1.10", new(*ipam.AddrNotOnNodeError)},
		{"ipv6 address", poolKey("r1"), "fd00::1", new(*ipam.AddrNotOnNodeError)},
		{"invalid key", ipam.Key{ContainerID: "r1"}, "10.0.1.40", new(*ipam.InvalidKeyError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", "10.0.1.32/28")
			poolAssign(t, p, "held", poolT0)  // 10.0.1.32
			poolAssign(t, p, "freed", poolT0) // 10.0.1.33
			p.Unassign(poolKey("freed"), poolT0)
			before := p.Stats(poolT0)

			restoredAt := poolT0.Add(-time.Hour)
			addr := netip.MustParseAddr(tt.addr)
			a, err := p.Restore(tt.key, ipam.Pod{Namespace: "ns", Name: "p"}, addr, restoredAt)
			poolWantErr(t, err, tt.wantErr)
			after := p.Stats(poolT0)
			if tt.wantErr != nil {
				if after.Assigned != before.Assigned || after.Cooling != before.Cooling {
					t.Errorf("refused Restore changed the pool: %v -> %v", before, after)
				}
				return
			}
			if a.Addr != addr || a.Key != tt.key {
				t.Errorf("Restore = %+v, want %s held by %s", a, addr, tt.key)
			}
			if got, ok := p.LookupAddr(addr); !ok || got.Key != tt.key {
				t.Errorf("LookupAddr(%s) = %+v, %v after Restore", addr, got, ok)
			}
		})
	}
}

func TestRestoreKeepsAssignedAt(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.40/32")
	then := poolT0.Add(-48 * time.Hour)
	a, err := p.Restore(poolKey("r1"), ipam.Pod{}, netip.MustParseAddr("10.0.1.40"), then)
	if err != nil {
		t.Fatal(err)
	}
	if !a.AssignedAt.Equal(then) {
		t.Errorf("AssignedAt = %v, want the checkpoint's %v", a.AssignedAt, then)
	}
	// Assign for the same key, as a retried ADD after restart would, keeps it.
	if b := poolAssign(t, p, "r1", poolT0); b != a {
		t.Errorf("Assign after Restore = %+v, want %+v", b, a)
	}
}

func TestRestoreErrorsNameTheHolder(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.40/32")
	poolAssign(t, p, "c1", poolT0)
	_, err := p.Restore(poolKey("r1"), ipam.Pod{}, netip.MustParseAddr("10.0.1.40"), poolT0)
	var held *ipam.AddrHeldError
	if !errors.As(err, &held) || held.Holder != poolKey("c1") || held.Pod.Name != "c1" {
		t.Errorf("got %v, want the address reported held by c1", err)
	}
	_, err = p.Restore(poolKey("r1"), ipam.Pod{}, netip.MustParseAddr("10.0.1.10"), poolT0)
	var notOn *ipam.AddrNotOnNodeError
	if !errors.As(err, &notOn) || notOn.PrimaryOf != "eni-b" {
		t.Errorf("got %v, want 10.0.1.10 named as eni-b's primary address", err)
	}
}

func TestRestoreCooldown(t *testing.T) {
	at := func(s int) time.Time { return poolT0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name     string
		clock    time.Time // pool clock before the restore; zero for a fresh pool
		freedAt  []time.Time
		tryAt    time.Time
		wantFree bool
		wantErr  any
	}{
		{"recently freed address waits", time.Time{}, []time.Time{at(0)}, at(29), false, nil},
		{"freed address reusable after cooldown", time.Time{}, []time.Time{at(0)}, at(30), true, nil},
		{"cooldown already over by the pool's clock", at(100), []time.Time{at(0)}, at(100), true, nil},
		{"later release wins", time.Time{}, []time.Time{at(0), at(20)}, at(40), false, nil},
		{"earlier release does not shorten", time.Time{}, []time.Time{at(20), at(0)}, at(40), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", "10.0.1.40/32")
			if !tt.clock.IsZero() {
				p.Stats(tt.clock)
			}
			for _, f := range tt.freedAt {
				if err := p.RestoreCooldown(netip.MustParseAddr("10.0.1.40"), f); err != nil {
					t.Fatal(err)
				}
			}
			_, err := p.Assign(poolKey("c1"), ipam.Pod{}, tt.tryAt)
			if got := err == nil; got != tt.wantFree {
				t.Errorf("Assign at %v: err %v, want free=%v", tt.tryAt.Sub(poolT0), err, tt.wantFree)
			}
		})
	}
}

func TestRestoreCooldownOrder(t *testing.T) {
	// Cooldowns restored out of order still end in order.
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.40/32", "10.0.1.41/32", "10.0.1.42/32")
	for addr, freed := range map[string]time.Duration{"10.0.1.40": 20 * time.Second, "10.0.1.41": 0, "10.0.1.42": 10 * time.Second} {
		if err := p.RestoreCooldown(netip.MustParseAddr(addr), poolT0.Add(freed)); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		at   time.Duration
		want int
	}{{29 * time.Second, 0}, {30 * time.Second, 1}, {45 * time.Second, 2}, {50 * time.Second, 3}} {
		if got := p.Stats(poolT0.Add(step.at)).Free; got != step.want {
			t.Errorf("at t0+%v: %d free, want %d", step.at, got, step.want)
		}
	}
}

func TestRestoreCooldownErrors(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.40/32")
	poolAssign(t, p, "c1", poolT0)
	err := p.RestoreCooldown(netip.MustParseAddr("10.0.1.40"), poolT0)
	poolWantErr(t, err, new(*ipam.AddrHeldError))
	err = p.RestoreCooldown(netip.MustParseAddr("10.0.9.9"), poolT0)
	poolWantErr(t, err, new(*ipam.AddrNotOnNodeError))
	if _, ok := p.LookupAddr(netip.MustParseAddr("10.0.1.40")); !ok {
		t.Error("refused RestoreCooldown released the assigned address")
	}
}
