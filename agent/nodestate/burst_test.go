package nodestate

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Issue 16, "start every attachment a burst needs as soon as the first
// ADD waits": one Add waiting at the rate of a burst means more are on
// their way, and every attachment they will need starts at once instead
// of one per wave.
func TestABurstStartsTheAttachmentsItWillNeedAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 6, IPv4PerENI: 3} // 2 pod addresses per ENI
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	var jobs []Job
	// The primary's 2 addresses, then Adds wait, one every 100 ms.
	for i := range 5 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		n.Step(now, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}})
		js, _ := drain(t, n, now)
		jobs = append(jobs, js...)
	}
	attaches := 0
	for _, j := range jobs {
		if isAttach(j) {
			attaches++
		}
	}
	// 3 waiting Adds 100 ms apart, over a 5 s attach delay guessed: 50
	// more expected, 5 ENIs, all the instance has left. Without them: 3
	// (the waiting Adds and a warm ENI).
	if attaches != 5 {
		t.Fatalf("%d attachments started for a burst; want the 5 the expected Adds need, at once", attaches)
	}
}

func TestBurstAnticipation(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name     string
		arrivals []int // ms after t0
		took     time.Duration
		now      int
		waiting  int
		free     int
		want     int
	}{
		{"nothing waits and the free addresses last: the pool keeps up", []int{0, 100, 200}, 0, 300, 0, 50, 0},
		{"nothing waits yet, the free addresses run out within an attach delay", []int{0, 20, 40, 60, 80, 100, 120, 140, 160, 180}, 0, 200, 0, 29, 250},
		{"nothing waits, and a few close Adds are churn, not a burst", []int{0, 20, 40}, 0, 100, 0, 29, 0},
		{"rate times the guessed attach delay", []int{0, 100, 200}, 0, 300, 3, 0, 50},
		{"rate times the attach delay last seen", []int{0, 100, 200}, 2 * time.Second, 300, 3, 0, 20},
		{"arrivals older than the window do not count", []int{0, 100, 1200, 1300, 1400}, 0, 1500, 3, 0, 50},
		{"all at one instant: no burst on its way", []int{0, 0, 0, 0}, 0, 100, 4, 0, 0},
		{"too few to tell a rate", []int{0, 100}, 0, 150, 2, 0, 0},
		{"the burst is over", []int{0, 100, 200}, 0, 600, 3, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := burst{attachTook: tt.took}
			for _, ms := range tt.arrivals {
				b.arrived(at(ms))
			}
			if got := b.anticipated(at(tt.now), tt.waiting, tt.free); got != tt.want {
				t.Fatalf("anticipated %d Adds, want %d", got, tt.want)
			}
		})
	}
}

// Issue 16: a fresh node's warm addresses serve a burst's first Adds;
// counting only the Adds that wait started the attachments when the
// warm pool was already gone, a second into a burst. Adds arriving at a
// rate that empties the free addresses within one attach delay start
// the attachments while every Add is still served.
func TestABurstStartsItsAttachmentsBeforeTheWarmAddressesRunOut(t *testing.T) {
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 6, IPv4PerENI: 16} // 15 pod addresses per ENI
	primary := primaryENI()
	for i := range 15 {
		primary.Blocks = append(primary.Blocks, netip.MustParsePrefix(fmt.Sprintf("10.0.0.%d/32", 5+i)))
	}
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primary}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	var jobs []Job
	// 10 Adds 20 ms apart: each finds a free address.
	for i := range 10 {
		now := t0.Add(time.Duration(i) * 20 * time.Millisecond)
		n.Step(now, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}})
		js, replies := drain(t, n, now)
		jobs = append(jobs, js...)
		if len(replies) != 1 || replies[0].Err != nil {
			t.Fatalf("Add %d: replies %v; want its address at once", i+1, replies)
		}
	}
	attaches := 0
	for _, j := range jobs {
		if isAttach(j) {
			attaches++
		}
	}
	// 50 Adds a second, 250 within the guessed 5 s attach delay, against
	// 5 free addresses: every ENI the instance has left. Without the
	// anticipation: 1, for WARM_ENI_TARGET.
	if attaches != 5 {
		t.Fatalf("%d attachments started while a burst emptied the warm addresses; want the 5 the expected Adds need", attaches)
	}
}
