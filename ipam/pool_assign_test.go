package ipam_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestAssignPlacement(t *testing.T) {
	tests := []struct {
		name   string
		blocks map[string][]string // eni id -> blocks
		held   []string            // containers assigned before, in order
		later  []string            // blocks added to eni-b after that
		want   string
	}{
		{
			name:   "lowest device index first, whatever the order blocks were added",
			blocks: map[string][]string{"eni-b": {"10.0.1.5/32"}, "eni-a": {"10.0.0.200/32"}},
			want:   "10.0.0.200",
		},
		{
			name:   "full eni skipped",
			blocks: map[string][]string{"eni-a": {"10.0.0.200/32"}, "eni-b": {"10.0.1.5/32"}},
			held:   []string{"c1"},
			want:   "10.0.1.5",
		},
		{
			name:   "lowest secondary address on the eni",
			blocks: map[string][]string{"eni-b": {"10.0.1.9/32", "10.0.1.7/32", "10.0.1.8/32"}},
			want:   "10.0.1.7",
		},
		{
			name:   "lowest address inside an empty prefix",
			blocks: map[string][]string{"eni-b": {"10.0.1.48/28", "10.0.1.32/28"}},
			want:   "10.0.1.32",
		},
		{
			name:   "fullest prefix before an emptier one at a lower address",
			blocks: map[string][]string{"eni-b": {"10.0.1.48/28"}},
			held:   []string{"c1", "c2"},
			later:  []string{"10.0.1.32/28"},
			want:   "10.0.1.50",
		},
		{
			name:   "secondary address (one free) before an empty prefix at a lower address",
			blocks: map[string][]string{"eni-b": {"10.0.1.32/28", "10.0.1.100/32"}},
			want:   "10.0.1.100",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			for _, id := range []string{"eni-b", "eni-a", "eni-c"} {
				poolAddBlocks(t, p, id, tt.blocks[id]...)
			}
			for _, c := range tt.held {
				poolAssign(t, p, c, poolT0)
			}
			poolAddBlocks(t, p, "eni-b", tt.later...)
			got := poolAssign(t, p, "next", poolT0)
			if got.Addr != netip.MustParseAddr(tt.want) {
				t.Errorf("assigned %s, want %s", got.Addr, tt.want)
			}
		})
	}
}

func TestAssignFillsTheFullerPrefixFirst(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.32/28", "10.0.1.48/28")
	var keys []string
	for i := range 20 {
		keys = append(keys, "c"+string(rune('a'+i)))
		poolAssign(t, p, keys[i], poolT0) // 10.0.1.32 to 10.0.1.51
	}
	// Free 13 addresses of the first prefix, leaving it with 13 free and
	// the second with 12: new pods go to the second, the fuller one, so the
	// first can empty and be given back.
	for _, c := range keys[:13] {
		p.Unassign(poolKey(c), poolT0)
	}
	now := poolT0.Add(poolCooldown)
	if got := poolAssign(t, p, "next", now).Addr; got != netip.MustParseAddr("10.0.1.52") {
		t.Errorf("assigned %s, want 10.0.1.52 in the fuller prefix", got)
	}
	for i := range 11 {
		poolAssign(t, p, "fill"+string(rune('a'+i)), now)
	}
	if got := poolAssign(t, p, "next2", now).Addr; got != netip.MustParseAddr("10.0.1.32") {
		t.Errorf("assigned %s, want 10.0.1.32 once the second prefix is full", got)
	}
}

func TestAssignIsIdempotent(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.32/28")
	first := poolAssign(t, p, "c1", poolT0)
	again, err := p.Assign(poolKey("c1"), ipam.Pod{Namespace: "other", Name: "x"}, poolT0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("second Assign returned %+v, want the first %+v", again, first)
	}
	if s := p.Stats(poolT0.Add(time.Minute)); s.Assigned != 1 {
		t.Errorf("%d assigned after a repeated Assign, want 1", s.Assigned)
	}
}

func TestAssignNeverHandsOutPrimaryAddresses(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-a", "10.0.0.16/28", "10.0.0.9/32", "10.0.0.12/32")
	poolAddBlocks(t, p, "eni-c", "10.0.0.0/32", "10.0.0.13/32")
	seen := map[netip.Addr]bool{}
	for i := 0; ; i++ {
		a, err := p.Assign(poolKey("c"+strings.Repeat("x", i)), ipam.Pod{}, poolT0)
		if err != nil {
			break
		}
		if seen[a.Addr] {
			t.Fatalf("%s handed out twice", a.Addr)
		}
		seen[a.Addr] = true
	}
	if len(seen) != 20 {
		t.Errorf("handed out %d addresses, want 20", len(seen))
	}
	for _, id := range []string{"eni-a", "eni-b", "eni-c"} {
		e, _ := p.ENI(id)
		if seen[e.PrimaryIP] {
			t.Errorf("primary address %s of %s handed to a pod", e.PrimaryIP, id)
		}
	}
}

func TestAssignErrors(t *testing.T) {
	tests := []struct {
		name    string
		key     ipam.Key
		blocks  []string // on eni-b
		wantErr any
		wantMsg string
	}{
		{"empty container id", ipam.Key{Network: "vpcnet", IfName: "eth0"}, []string{"10.0.1.5/32"}, new(*ipam.InvalidKeyError), "must all be set"},
		{"empty interface", ipam.Key{Network: "vpcnet", ContainerID: "c"}, []string{"10.0.1.5/32"}, new(*ipam.InvalidKeyError), "must all be set"},
		{"no blocks", poolKey("c9"), nil, new(*ipam.NoFreeAddressError), "no free address: 0 assigned, 0 cooling, 0 free on 3 ENIs"},
		{"all assigned or cooling", poolKey("c9"), []string{"10.0.1.5/32", "10.0.1.6/32", "10.0.1.7/32"}, new(*ipam.NoFreeAddressError),
			"no free address: 2 assigned, 1 cooling (first free at 2025-01-02T03:04:35Z), 0 free on 3 ENIs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", tt.blocks...)
			for _, c := range []string{"c1", "c2", "c3"}[:len(tt.blocks)] {
				poolAssign(t, p, c, poolT0)
			}
			p.Unassign(poolKey("c2"), poolT0)
			_, err := p.Assign(tt.key, ipam.Pod{}, poolT0.Add(time.Second))
			poolWantErr(t, err, tt.wantErr)
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestNoFreeAddressErrorCarriesStats(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.32/28")
	for i := range 16 {
		poolAssign(t, p, "c"+strings.Repeat("x", i), poolT0)
	}
	p.Unassign(poolKey("cx"), poolT0.Add(time.Second))
	_, err := p.Assign(poolKey("late"), ipam.Pod{}, poolT0.Add(2*time.Second))
	var nf *ipam.NoFreeAddressError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want *NoFreeAddressError", err)
	}
	s := nf.Stats
	if s.Total != 16 || s.Assigned != 15 || s.Cooling != 1 || s.Free != 0 || !s.NextFree.Equal(poolT0.Add(time.Second+poolCooldown)) {
		t.Errorf("stats in error %+v, want 16 total, 15 assigned, 1 cooling until t0+31s", s)
	}
	if !strings.Contains(err.Error(), "late") {
		t.Errorf("error %q does not name the key that got nothing", err)
	}
}

func TestAssignNoENI(t *testing.T) {
	_, err := ipam.NewPool(poolCooldown).Assign(poolKey("c1"), ipam.Pod{}, poolT0)
	var nf *ipam.NoFreeAddressError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "no ENI") {
		t.Errorf("got %v, want a no-free-address error saying the pool has no ENI", err)
	}
}
