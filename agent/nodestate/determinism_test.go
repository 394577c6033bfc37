package nodestate

import (
	"bytes"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"testing"
	"time"
)

// The simulation replays a seed from its trace, the agent's log lines
// included: quarantines lifted in one pass are lifted, and logged, in
// address order, not in the map's random order.
func TestQuarantinesLiftedTogetherAreLiftedInAddressOrder(t *testing.T) {
	var logs bytes.Buffer
	cfg := testConfig()
	cfg.Limits.IPv4PerENI = 10
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	eni := primaryENI()
	var routed []Route
	for i := range 8 {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)})
		eni.Blocks = append(eni.Blocks, netip.PrefixFrom(a, 32))
		routed = append(routed, Route{Addr: a})
	}
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{eni}, Routed: routed}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	logs.Reset()
	n.Step(t0.Add(time.Second), HostResult{Routed: nil})
	var lifted []string
	for _, m := range regexp.MustCompile(`quarantine lifted.* addr=(\S+)`).FindAllStringSubmatch(logs.String(), -1) {
		lifted = append(lifted, m[1])
	}
	if len(lifted) != 8 || !slices.IsSortedFunc(lifted, func(a, b string) int {
		return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b))
	}) {
		t.Errorf("quarantines lifted in the order %v; want the 8 addresses in address order", lifted)
	}
}
