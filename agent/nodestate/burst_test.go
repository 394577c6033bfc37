package nodestate

import (
	"errors"
	"fmt"
	"slices"
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
	// 3 waiting Adds 100 ms apart: as many again as came after the
	// first (2) are expected, so 5 Adds need 3 ENIs, and a warm one: 4.
	// Without the guess: 3 (the waiting Adds and a warm ENI). Issue 25:
	// the guess was 50 (the rate over a 5 s attach delay), which took
	// all 5 ENIs the instance had left for 5 pods.
	if attaches != 4 {
		t.Fatalf("%d attachments started for a burst; want the 4 the expected Adds need, at once", attaches)
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
		want     int
	}{
		{"nothing waits: the pool keeps up", []int{0, 100, 200}, 0, 300, 0, 0},
		{"as many again as came after the first", []int{0, 100, 200}, 0, 300, 3, 2},
		{"no more than the rate brings within an attach delay", []int{0, 100, 200}, 100 * time.Millisecond, 300, 3, 1},
		{"arrivals older than the window do not count", []int{0, 100, 1200, 1300, 1400}, 0, 1500, 3, 2},
		{"a fast burst is not extrapolated over the attach delay", []int{0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50}, 0, 55, 11, 10},
		{"all at one instant: no burst on its way", []int{0, 0, 0, 0}, 0, 100, 4, 0},
		{"too few to tell a rate", []int{0, 100}, 0, 150, 2, 0},
		{"the burst is over", []int{0, 100, 200}, 0, 600, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := burst{attachTook: tt.took}
			for _, ms := range tt.arrivals {
				b.waited(at(ms))
			}
			if got := b.anticipated(at(tt.now), tt.waiting); got != tt.want {
				t.Fatalf("anticipated %d Adds, want %d", got, tt.want)
			}
		})
	}
}

// Issue 16: IMDS lags EC2 by seconds, so waiting for it alone makes a
// burst's pods wait an attach delay plus the lag. EC2 is asked when the
// attachment should be done, and a few times shortly after if it was
// not yet, and its answer adopts the ENI.
func TestAnAttachmentIsCheckedInEC2WhenItShouldBeDoneAndShortlyAfter(t *testing.T) {
	n := attachAnswered(t)
	// Neither IMDS nor EC2 says it is attached, all along; each answer
	// takes 30 ms, which must not delay the EC2 ask.
	asked := askedEC2(t, n, 20*time.Second, func(j Job) AttachResult {
		return AttachResult{JobID: j.ID, NotYet: true, IMDSOnly: j.MAC != ""}
	})
	if len(asked) == 0 || asked[0] != attachGuess {
		t.Fatalf("EC2 asked at %v after the attach; want first at %s, when an attach is done", asked, attachGuess)
	}
	// Then a few quick follow-ups, each 250 ms after the last answer
	// (which took 30 ms), and no more until IMDS is given up on.
	want := []time.Duration{attachGuess, 5280 * time.Millisecond, 5560 * time.Millisecond, 5840 * time.Millisecond}
	if len(asked) < len(want) || !slices.Equal(asked[:len(want)], want) {
		t.Fatalf("EC2 asked at %v; want at %v", asked, want)
	}
	if len(asked) > len(want) && asked[len(want)] < imdsAttachWatch {
		t.Fatalf("EC2 asked at %v: again before IMDS was given up on at %s", asked, imdsAttachWatch)
	}
}

// attachAnswered is a node whose Adds waited and whose attachment EC2
// has just answered (at t0), the ENI's MAC known for IMDS.
func attachAnswered(t *testing.T) *Node {
	t.Helper()
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	for i := range 3 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}})
	}
	jobs, _ := drain(t, n, t0)
	attach, ok := find(jobs, isAttach)
	if !ok {
		t.Fatalf("no attach for waiting Adds; jobs %v", jobs)
	}
	n.Step(t0, ActionResult{JobID: attach.ID, ENIID: "eni-new", MAC: "0a:00:00:00:00:01", AttachmentID: "att-new", DeleteOnTermination: true})
	drain(t, n, t0)
	return n
}

// askedEC2 runs n's attachment checks for d after t0, each answered by
// answer 30 ms after it starts, and returns when EC2 (not IMDS) was
// asked.
func askedEC2(t *testing.T, n *Node, d time.Duration, answer func(Job) AttachResult) []time.Duration {
	t.Helper()
	var asked []time.Duration
	for now := t0; now.Before(t0.Add(d)); {
		now = n.Ready().Wake
		n.Step(now, Tick{})
		jobs, _ := drain(t, n, now)
		for _, j := range jobs {
			if j.Kind != JobConfirmAttach {
				continue
			}
			if j.MAC == "" {
				asked = append(asked, now.Sub(t0))
			}
			n.Step(now.Add(30*time.Millisecond), answer(j))
		}
	}
	return asked
}

// The quick follow-ups are for an ask that came early, not for one EC2
// refused: a throttled call is not repeated 250 ms later.
func TestAnEC2AskThatFailedIsNotFollowedUpQuickly(t *testing.T) {
	n := attachAnswered(t)
	asked := askedEC2(t, n, 10*time.Second, func(j Job) AttachResult {
		if j.MAC == "" {
			return AttachResult{JobID: j.ID, Err: errors.New("RequestLimitExceeded: Request limit exceeded.")}
		}
		return AttachResult{JobID: j.ID, NotYet: true, IMDSOnly: true}
	})
	if len(asked) != 1 {
		t.Fatalf("EC2 asked at %v; want once, at %s, and not again soon after it refused", asked, attachGuess)
	}
}
