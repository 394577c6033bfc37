package ipam

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestSeizeTakesACoolingAddressThatTheHostRoutes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewPool(30 * time.Second)
	if err := p.AddENI(ENI{ID: "eni-a", DeviceIndex: 0, Primary: true, SubnetID: "s", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"), PrimaryIP: netip.MustParseAddr("10.0.0.4")}); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("10.0.0.9")
	if err := p.AddBlock("eni-a", netip.PrefixFrom(addr, 32)); err != nil {
		t.Fatal(err)
	}
	if err := p.RestoreCooldown(addr, t0); err != nil {
		t.Fatal(err)
	}
	if !p.IsCooling(addr) {
		t.Fatal("address should be cooling after RestoreCooldown")
	}
	q := Key{Network: "q", ContainerID: "10.0.0.9", IfName: "host-route"}
	as, err := p.Seize(q, addr, t0)
	if err != nil {
		t.Fatalf("Seize of a cooling address: %v", err)
	}
	if as.Addr != addr || p.IsCooling(addr) {
		t.Fatalf("seized %v, still cooling %v", as.Addr, p.IsCooling(addr))
	}
	if _, err := p.Assign(Key{Network: "n", ContainerID: "c", IfName: "eth0"}, Pod{}, t0.Add(time.Hour)); err == nil {
		t.Fatal("the seized address was handed to another key")
	}
	var held *AddrHeldError
	if _, err := p.Seize(Key{Network: "n", ContainerID: "other", IfName: "eth0"}, addr, t0); !errors.As(err, &held) {
		t.Fatalf("Seize of a held address: got %v, want AddrHeldError", err)
	}
	st := p.Stats(t0)
	if st.Assigned != 1 || st.Cooling != 0 || st.Free != 0 {
		t.Fatalf("stats after seize: %s", st)
	}
}
