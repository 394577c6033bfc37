package ipam_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestAddBlock(t *testing.T) {
	// The node already has 10.0.0.32/28 on eni-a and 10.0.0.100/32 on eni-c.
	tests := []struct {
		name     string
		eni      string
		block    string
		wantErr  any
		wantSize int
	}{
		{"secondary address", "eni-a", "10.0.0.5/32", nil, 1},
		{"delegated prefix", "eni-a", "10.0.0.48/28", nil, 16},
		{"prefix on eni sharing the subnet", "eni-c", "10.0.0.64/28", nil, 16},
		{"unknown eni", "eni-z", "10.0.0.5/32", new(*ipam.UnknownENIError), 0},
		{"ipv6", "eni-a", "fd00::/128", new(*ipam.InvalidBlockError), 0},
		{"/27 is not a block size", "eni-a", "10.0.0.64/27", new(*ipam.InvalidBlockError), 0},
		{"/30 is not a block size", "eni-a", "10.0.0.64/30", new(*ipam.InvalidBlockError), 0},
		{"host bits set", "eni-a", "10.0.0.66/28", new(*ipam.InvalidBlockError), 0},
		{"outside subnet", "eni-a", "10.0.1.5/32", new(*ipam.BlockOutsideSubnetError), 0},
		{"other eni's subnet", "eni-b", "10.0.0.5/32", new(*ipam.BlockOutsideSubnetError), 0},
		{"same block again", "eni-a", "10.0.0.32/28", new(*ipam.OverlapError), 0},
		{"same block on another eni", "eni-c", "10.0.0.32/28", new(*ipam.OverlapError), 0},
		{"address inside a prefix", "eni-c", "10.0.0.47/32", new(*ipam.OverlapError), 0},
		{"prefix around an address", "eni-a", "10.0.0.96/28", new(*ipam.OverlapError), 0},
		{"own primary address", "eni-a", "10.0.0.10/32", new(*ipam.PrimaryIPError), 0},
		{"prefix holding another eni's primary address", "eni-a", "10.0.0.0/28", new(*ipam.PrimaryIPError), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-a", "10.0.0.32/28")
			poolAddBlocks(t, p, "eni-c", "10.0.0.100/32")
			before := p.Stats(poolT0).Total
			err := p.AddBlock(tt.eni, netip.MustParsePrefix(tt.block))
			poolWantErr(t, err, tt.wantErr)
			if got := p.Stats(poolT0).Total - before; got != tt.wantSize {
				t.Errorf("pool grew by %d addresses, want %d", got, tt.wantSize)
			}
		})
	}
}

func TestAddBlockErrorsNameTheConflict(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-c", "10.0.0.100/32")
	var ov *ipam.OverlapError
	err := p.AddBlock("eni-a", netip.MustParsePrefix("10.0.0.96/28"))
	if !errors.As(err, &ov) || ov.Other != netip.MustParsePrefix("10.0.0.100/32") || ov.OtherENI != "eni-c" {
		t.Errorf("got %v, want overlap with 10.0.0.100/32 on eni-c", err)
	}
	var pe *ipam.PrimaryIPError
	err = p.AddBlock("eni-a", netip.MustParsePrefix("10.0.0.0/28"))
	if !errors.As(err, &pe) || pe.ENIID == "" || !netip.MustParsePrefix("10.0.0.0/28").Contains(pe.Addr) {
		t.Errorf("got %v, want the ENI whose primary address 10.0.0.0/28 holds", err)
	}
}

func TestRemoveBlock(t *testing.T) {
	tests := []struct {
		name    string
		block   string
		setup   func(t *testing.T, p *ipam.Pool)
		now     time.Time
		wantErr any
	}{
		{"free block", "10.0.1.16/28", nil, poolT0, nil},
		{"unknown block", "10.0.1.48/28", nil, poolT0, new(*ipam.UnknownBlockError)},
		{"address inside a block is not a block", "10.0.1.17/32", nil, poolT0, new(*ipam.UnknownBlockError)},
		{"address assigned", "10.0.1.16/28", func(t *testing.T, p *ipam.Pool) {
			poolAssign(t, p, "c1", poolT0) // 10.0.1.40, the fuller block
			poolAssign(t, p, "c2", poolT0) // 10.0.1.16
		}, poolT0, new(*ipam.InUseError)},
		{"address cooling", "10.0.1.16/28", func(t *testing.T, p *ipam.Pool) {
			poolAssign(t, p, "c1", poolT0)
			poolAssign(t, p, "c2", poolT0)
			p.Unassign(poolKey("c2"), poolT0)
		}, poolT0.Add(poolCooldown - time.Nanosecond), new(*ipam.InUseError)},
		{"cooldown over", "10.0.1.16/28", func(t *testing.T, p *ipam.Pool) {
			poolAssign(t, p, "c1", poolT0)
			poolAssign(t, p, "c2", poolT0)
			p.Unassign(poolKey("c2"), poolT0)
		}, poolT0.Add(poolCooldown), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", "10.0.1.16/28", "10.0.1.40/32")
			if tt.setup != nil {
				tt.setup(t, p)
			}
			before := p.Stats(tt.now).Total
			err := p.RemoveBlock(netip.MustParsePrefix(tt.block), tt.now)
			poolWantErr(t, err, tt.wantErr)
			want := before
			if tt.wantErr == nil {
				want -= 16
			}
			if got := p.Stats(tt.now).Total; got != want {
				t.Errorf("pool has %d addresses, want %d", got, want)
			}
		})
	}
}

func TestRemovedBlockIsGone(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.16/28", "10.0.1.40/32")
	if err := p.RemoveBlock(netip.MustParsePrefix("10.0.1.16/28"), poolT0); err != nil {
		t.Fatal(err)
	}
	a := poolAssign(t, p, "c1", poolT0)
	if a.Addr != netip.MustParseAddr("10.0.1.40") {
		t.Errorf("assigned %s, want 10.0.1.40, the only address left", a.Addr)
	}
	_, err := p.Restore(poolKey("c2"), ipam.Pod{}, netip.MustParseAddr("10.0.1.17"), poolT0)
	poolWantErr(t, err, new(*ipam.AddrNotOnNodeError))
	// The prefix can come back, on any ENI in its subnet.
	poolAddBlocks(t, p, "eni-b", "10.0.1.16/28")
}
