package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Fault makes an action misbehave: every request waits Latency first, then
// fails with Code with probability ErrorRate (0 to 1). Code defaults to
// InternalError; any EC2 code works, e.g. UnauthorizedOperation,
// RequestLimitExceeded or InsufficientFreeAddressesInSubnet, and gets the
// HTTP status EC2 gives it.
type Fault struct {
	ErrorRate float64
	Code      string
	Latency   time.Duration
}

func (f Fault) validate() error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 {
		return fmt.Errorf("errorRate %v: want a probability from 0 to 1", f.ErrorRate)
	}
	if f.Latency < 0 {
		return fmt.Errorf("latency %v must not be negative", f.Latency)
	}
	return nil
}

// faults holds the injected faults and the seeded generator that decides
// which requests fail, so a run with the same seed fails the same calls.
type faults struct {
	// mu guards byAction and rng.
	mu       sync.Mutex
	byAction map[string]Fault
	rng      *rand.Rand
}

func newFaults(seed int64, specs map[string]FaultSpec) *faults {
	f := &faults{byAction: map[string]Fault{}, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661756c74))} // "fault"
	for action, s := range specs {
		f.set(action, s.Fault())
	}
	return f
}

// SetFault injects f into action ("" or "*" for every action), replacing
// what was there; the zero Fault clears it. A fault on a named action
// takes precedence over the one on every action. ErrorRate is clamped to
// 0..1 and a negative Latency counts as none.
func (c *Cloud) SetFault(action string, f Fault) {
	c.faults.set(action, f)
}

func (fs *faults) set(action string, f Fault) {
	if action == "" {
		action = "*"
	}
	f.ErrorRate = min(max(f.ErrorRate, 0), 1)
	f.Latency = max(f.Latency, 0)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f == (Fault{}) {
		delete(fs.byAction, action)
		return
	}
	fs.byAction[action] = f
}

// draw decides the fate of one request to action: how long to wait and,
// if it must fail, with which code.
func (fs *faults) draw(action string) (latency time.Duration, code string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.byAction[action]
	if !ok {
		f, ok = fs.byAction["*"]
	}
	if !ok {
		return 0, ""
	}
	fail := f.ErrorRate >= 1 || (f.ErrorRate > 0 && fs.rng.Float64() < f.ErrorRate)
	if !fail {
		return f.Latency, ""
	}
	if f.Code == "" {
		return f.Latency, codeInternalError
	}
	return f.Latency, f.Code
}
