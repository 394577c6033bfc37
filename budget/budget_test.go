package budget

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// tokenBucket is EC2's side of the account: a bucket of burst tokens
// refilled at refill per second, one token per call, refusing a call
// that finds it empty.
type tokenBucket struct {
	burst, refill float64
	tokens        float64
	at            time.Time
}

func (b *tokenBucket) take(now time.Time) bool {
	if b.at.IsZero() {
		b.tokens, b.at = b.burst, now
	}
	b.tokens = min(b.burst, b.tokens+b.refill*now.Sub(b.at).Seconds())
	b.at = now
	// A float's last bits must not turn a call made exactly on schedule
	// into a refusal.
	if b.tokens < 1-1e-9 {
		return false
	}
	b.tokens--
	return true
}

type call struct {
	at     time.Time
	action string
}

// TestGrantedCallsNeverExhaustTheAccountsBuckets is the Ledger's safety
// property: whatever nodes ask, urgent or not, whenever, if every
// granted call is made when its grant says, EC2's buckets never refuse
// one. Checked over thousands of seeded random schedules.
func TestGrantedCallsNeverExhaustTheAccountsBuckets(t *testing.T) {
	actions := []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute", "DescribeNetworkInterfaces", "AssignPrivateIpAddresses"}
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := DefaultConfig()
		// Small buckets, so the schedule runs them dry often.
		for a := range cfg.Buckets {
			cfg.Buckets[a] = Bucket{Burst: 1 + rng.IntN(20), Refill: 1 + 10*rng.Float64()}
		}
		cfg.Margin = 0.5 + rng.Float64()/2
		cfg.Reserve = rng.Float64() * 0.9
		l := New(cfg)
		now := t0
		var calls []call
		for range 300 {
			now = now.Add(time.Duration(rng.ExpFloat64() * float64(100*time.Millisecond)))
			r := Request{Node: "n", Urgent: rng.IntN(2) == 0}
			for _, a := range actions {
				if rng.IntN(3) == 0 {
					r.Actions = append(r.Actions, a)
				}
			}
			if rng.IntN(20) == 0 {
				r.Throttled = []string{actions[rng.IntN(len(actions))]}
			}
			g := l.Reserve(now, r)
			if g.Wait < 0 || g.Deferred < 0 || (g.Granted() && g.Deferred != 0) {
				t.Fatalf("seed %d: grant %+v", seed, g)
			}
			if !g.Granted() {
				continue
			}
			if !r.Urgent && g.Wait != 0 {
				t.Fatalf("seed %d: warm-pool request granted with a wait of %v; it should be deferred instead", seed, g.Wait)
			}
			for _, a := range r.Actions {
				calls = append(calls, call{now.Add(g.Wait), a})
			}
		}
		slices.SortStableFunc(calls, func(a, b call) int { return a.at.Compare(b.at) })
		buckets := map[string]*tokenBucket{}
		for _, c := range calls {
			b, ok := buckets[c.action]
			if !ok {
				spec := cfg.Buckets[c.action]
				b = &tokenBucket{burst: float64(spec.Burst), refill: spec.Refill}
				buckets[c.action] = b
			}
			if !b.take(c.at) {
				t.Fatalf("seed %d (margin %.2f): EC2 would refuse %s at %v", seed, cfg.Margin, c.action, c.at.Sub(t0))
			}
		}
	}
}

func TestUrgentRequestsAreSpacedAtTheMarginOfTheRefillAfterTheBurst(t *testing.T) {
	cfg := DefaultConfig() // mutating 100 tokens at 5/s, margin 0.9
	l := New(cfg)
	create := []string{"CreateNetworkInterface"}
	var waits []time.Duration
	for range 100 {
		waits = append(waits, l.Reserve(t0, Request{Node: "n", Actions: create, Urgent: true}).Wait)
	}
	// 90 tokens of the burst at once, then one every 1/4.5 s.
	for i, w := range waits[:90] {
		if w != 0 {
			t.Fatalf("request %d waits %v; the first 90 (the burst at 90%%) should go at once", i, w)
		}
	}
	gap := time.Second * 2 / 9 // 1/4.5 s
	for i, w := range waits[90:] {
		want := time.Duration(i+1) * gap
		if d := w - want; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("request %d waits %v; want %v (one every %v)", 90+i, w, want, gap)
		}
	}
}

func TestWarmPoolWorkWaitsForPodsAndLeavesTheReserve(t *testing.T) {
	l := New(DefaultConfig())
	create := []string{"CreateNetworkInterface"}
	// Warm work takes the burst down to the reserve, then is deferred.
	warm := 0
	for l.Reserve(t0, Request{Node: "w", Actions: create}).Granted() {
		warm++
		if warm > 100 {
			t.Fatal("warm-pool work was never deferred")
		}
	}
	if warm != 45 {
		t.Errorf("warm-pool work took %d tokens of the 90 granted at once; want 45 (the reserve is half)", warm)
	}
	// Pods still find the reserve at once.
	for i := range 45 {
		if g := l.Reserve(t0, Request{Node: "u", Actions: create, Urgent: true}); g.Wait != 0 {
			t.Fatalf("urgent request %d waits %v behind warm-pool work", i, g.Wait)
		}
	}
	// With pods queued, warm work is told to come back later, within
	// bounds, and does not take their place.
	urgent := l.Reserve(t0, Request{Node: "u", Actions: create, Urgent: true})
	g := l.Reserve(t0, Request{Node: "w", Actions: create})
	if g.Granted() || g.Deferred < minDefer || g.Deferred >= maxDefer+deferSpread {
		t.Fatalf("warm request while pods queue: %+v; want deferred between %v and %v", g, minDefer, maxDefer+deferSpread)
	}
	next := l.Reserve(t0, Request{Node: "u", Actions: create, Urgent: true})
	if gap := next.Wait - urgent.Wait; gap > 230*time.Millisecond {
		t.Errorf("the next urgent request waits %v after the previous one; a deferred warm request took a slot", gap)
	}
	// Once the schedule is idle again, warm work goes through.
	if g := l.Reserve(t0.Add(time.Minute), Request{Node: "w", Actions: create}); !g.Granted() || g.Wait != 0 {
		t.Errorf("warm request on an idle schedule: %+v; want granted at once", g)
	}
}

func TestAFirstRefusalHalvesTheRateAndRecoveryWinsItBack(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Recovery = time.Minute
	l := New(cfg)
	rate := func(at time.Time) float64 { return rateOf(t, l, "CreateNetworkInterface", at) }
	l.Reserve(t0, Request{Node: "n", Actions: []string{"CreateNetworkInterface"}})
	if r := rate(t0); r < 4.49 || r > 4.51 {
		t.Fatalf("rate %v; want 4.5 (5/s at 90%%)", r)
	}
	l.Reserve(t0, Request{Node: "n", Throttled: []string{"CreateNetworkInterface"}})
	if r := rate(t0); r < 2.24 || r > 2.26 {
		t.Fatalf("rate after a refusal %v; want half of 4.5", r)
	}
	// A second refusal in the same wave does not halve it again.
	l.Reserve(t0.Add(100*time.Millisecond), Request{Node: "m", Throttled: []string{"CreateNetworkInterface"}})
	if r := rate(t0.Add(100 * time.Millisecond)); r < 2.2 {
		t.Fatalf("rate %v after two refusals of one wave; want it halved once", r)
	}
	if r := rate(t0.Add(2 * time.Minute)); r < 4.49 {
		t.Fatalf("rate two minutes later %v; want 4.5 again", r)
	}
}

// A new leader cannot know what the last one granted just before it
// stopped: its term starts with every bucket taken as empty.
func TestANewTermStartsWithTheBucketsSpent(t *testing.T) {
	l := New(DefaultConfig())
	create := []string{"CreateNetworkInterface"}
	l.Reserve(t0, Request{Node: "n", Actions: []string{"AttachNetworkInterface"}, Urgent: true}) // an action seen before the term
	l.StartTerm(Term{Now: t0, EmptyAt: t0})
	gap := time.Second * 2 / 9 // 4.5 a second
	for _, acts := range [][]string{create, {"AttachNetworkInterface"}} {
		g := l.Reserve(t0, Request{Node: "n", Actions: acts, Urgent: true})
		if d := g.Wait - gap; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("%v: first grant of the term waits %v; want one gap (%v): no burst", acts, g.Wait, gap)
		}
	}
	// The burst comes back as the bucket refills: after 20 s, all 90.
	later := t0.Add(20 * time.Second)
	for i := range 89 {
		if g := l.Reserve(later, Request{Node: "n", Actions: create, Urgent: true}); g.Wait != 0 {
			t.Fatalf("20 s into the term, grant %d waits %v; want the refilled burst at once", i, g.Wait)
		}
	}
}

// A subnet one node found out of addresses is under pressure for every
// node on it, for PressureHold after the last such report.
func TestASubnetFoundExhaustedIsUnderPressureForEveryNodeOnIt(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PressureHold = 10 * time.Minute
	l := New(cfg)
	if g := l.Reserve(t0, Request{Node: "a", Subnets: []string{"subnet-1"}}); len(g.Pressure) != 0 {
		t.Fatalf("pressure %v before any report", g.Pressure)
	}
	l.Reserve(t0, Request{Node: "a", Subnets: []string{"subnet-1"}, Exhausted: []string{"subnet-1"}})
	for _, tt := range []struct {
		node    string
		subnets []string
		at      time.Duration
		want    []string
	}{
		{"b", []string{"subnet-1", "subnet-2"}, time.Minute, []string{"subnet-1"}},
		{"c", []string{"subnet-2"}, time.Minute, nil},
		{"b", []string{"subnet-1"}, 10 * time.Minute, nil},
	} {
		g := l.Reserve(t0.Add(tt.at), Request{Node: tt.node, Subnets: tt.subnets})
		if !slices.Equal(g.Pressure, tt.want) {
			t.Errorf("node %s on %v at +%v: pressure %v; want %v", tt.node, tt.subnets, tt.at, g.Pressure, tt.want)
		}
	}
}

func TestConfigValidationNamesTheField(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"margin zero", func(c *Config) { c.Margin = 0 }, "budget margin 0"},
		{"margin above one", func(c *Config) { c.Margin = 1.5 }, "budget margin 1.5"},
		{"empty bucket", func(c *Config) { c.Buckets["CreateNetworkInterface"] = Bucket{} }, "budget bucket CreateNetworkInterface"},
		{"reserve all", func(c *Config) { c.Reserve = 1 }, "budget reserve 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			if err == nil || !startsWith(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v; want an error starting %q", err, tt.want)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig is invalid: %v", err)
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }
