// Package budget shares one EC2 account's request budget among the nodes
// of a cluster (issue 15, point 4).
//
// EC2 limits requests per account and Region with a token bucket per
// action, shared by every node. Agents that each stay polite on their
// own still overrun it together: a thousand of them learn of the limit
// only by being refused, and nearly every pod of a large join waits while
// its node is throttled (BENCHMARKS.md section 8). A Ledger is the
// cluster's one schedule of EC2 calls: an agent asks before it calls, and
// the Ledger answers when the calls may be made, spacing grants at a
// margin below EC2's refill so the account's buckets never run dry.
//
// Calls for pods that wait for an address (urgent) get a place in the
// schedule at once, first come first served; calls that only fill a warm
// pool are granted only while the schedule has room now, so they never
// delay a waiting pod. When EC2 still refuses (other clients share the
// account), the agents say so and the Ledger halves that action's rate,
// then wins it back a little at a time (AIMD).
//
// The Ledger is pure: no I/O, no clock of its own, no goroutine. The
// controller (cmd/vpcnet-budget) serves it over HTTP to the agents, and
// package scale runs it in simulated time.
package budget

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bucket is one EC2 action's token bucket: Burst tokens at most, refilled
// at Refill per second.
type Bucket struct {
	Burst  int
	Refill float64
}

// Config is the account's buckets and how much of them the cluster's
// agents may use.
type Config struct {
	// Buckets are per action; actions not listed use Default.
	Buckets map[string]Bucket
	Default Bucket
	// Margin is the fraction of each bucket's refill and burst granted
	// (0 < Margin <= 1): the rest is left for other clients of the
	// account (the console, other controllers, Terraform).
	Margin float64
	// Recovery is how long a halved rate takes to win back what it lost
	// (additive increase). Default 60 s.
	Recovery time.Duration
	// Floor is the lowest fraction of the granted rate AIMD goes down to.
	// Default 0.1.
	Floor float64
	// PressureHold is how long a subnet stays under pressure after a
	// node last found it out of addresses. Default 10 min.
	PressureHold time.Duration
	// Reserve is the fraction of each bucket's burst that warm-pool work
	// may not take: kept for pods that start waiting later (default
	// 0.5). Without it warm pools drain every token the moment it
	// refills, and the next wave of pods finds an empty bucket.
	Reserve float64
	// Horizon is the furthest ahead of now a grant may let calls be
	// made; zero is no limit. An urgent request whose slot lies further
	// ahead keeps its place in the schedule but is deferred with a
	// ticket, and granted its slot when it comes back with it. A grant
	// is a promise the next leader cannot see: bounded by the horizon,
	// none outlives the term it was made in by more than the horizon,
	// so a new leader whose term starts later than that after the last
	// grant (the controller's Lease timings see to it) books no slot
	// twice. Without it a join's grants ran minutes ahead, and a new
	// leader granted them again.
	Horizon time.Duration
}

// DefaultConfig is the account's buckets for the actions vpcnet calls
// as EC2's request-token page gives them for Describe calls (100 tokens,
// 20 a second) and as issue 15 quotes them for mutating ENI actions
// (about 5 a second; the burst of 100 is the local cloud's default),
// granted at 90%. Accounts with raised limits set their own.
func DefaultConfig() Config {
	mut := Bucket{Burst: 100, Refill: 5}
	return Config{
		Buckets: map[string]Bucket{
			"DescribeNetworkInterfaces":       {Burst: 100, Refill: 20},
			"DescribeSubnets":                 {Burst: 100, Refill: 20},
			"DescribeInstances":               {Burst: 100, Refill: 20},
			"DescribeInstanceTypes":           {Burst: 100, Refill: 20},
			"CreateNetworkInterface":          mut,
			"AttachNetworkInterface":          mut,
			"ModifyNetworkInterfaceAttribute": mut,
			"AssignPrivateIpAddresses":        mut,
			"UnassignPrivateIpAddresses":      mut,
			"DetachNetworkInterface":          mut,
			"DeleteNetworkInterface":          mut,
			"CreateTags":                      mut,
		},
		Default: mut,
		Margin:  0.9,
	}
}

// Validate says what is wrong with c, naming the field and the fix.
func (c Config) Validate() error {
	if !(c.Margin > 0 && c.Margin <= 1) {
		return fmt.Errorf("budget margin %v: must be above 0 and at most 1 (the share of EC2's refill the cluster may use, e.g. 0.9)", c.Margin)
	}
	check := func(name string, b Bucket) error {
		if b.Burst < 1 || !(b.Refill > 0) {
			return fmt.Errorf("budget bucket %s (burst %d, refill %v/s): burst must be at least 1 and refill above 0", name, b.Burst, b.Refill)
		}
		return nil
	}
	if err := check("default", c.Default); err != nil {
		return err
	}
	for a, b := range c.Buckets {
		if err := check(a, b); err != nil {
			return err
		}
	}
	if c.Floor < 0 || c.Floor > 1 {
		return fmt.Errorf("budget floor %v: must be between 0 and 1", c.Floor)
	}
	if c.Horizon < 0 {
		return fmt.Errorf("budget horizon %v: must not be negative (zero: no limit)", c.Horizon)
	}
	if c.Reserve < 0 || c.Reserve >= 1 {
		return fmt.Errorf("budget reserve %v: must be at least 0 and below 1 (the share of each burst kept for waiting pods)", c.Reserve)
	}
	return nil
}

// Request asks for one job's EC2 calls.
type Request struct {
	// Node names the asking node, for metrics and logs.
	Node string `json:"node"`
	// Actions are the EC2 actions the job calls, each at most once.
	Actions []string `json:"actions"`
	// Urgent says pods on the node wait for an address.
	Urgent bool `json:"urgent,omitempty"`
	// Throttled are actions EC2 answered RequestLimitExceeded since the
	// node's last request: the account is busier than the schedule
	// assumes.
	Throttled []string `json:"throttled,omitempty"`
	// Subnets are the subnets the node's pool uses: the answer says
	// which of them are under pressure.
	Subnets []string `json:"subnets,omitempty"`
	// Exhausted are subnets EC2 lately refused to give the node
	// addresses in, for want of any (InsufficientFreeAddressesInSubnet).
	Exhausted []string `json:"exhausted,omitempty"`
	// Ticket is the last answer's, when it deferred the request with
	// one: its slot was booked then.
	Ticket uint64 `json:"ticket,omitempty"`
}

// Grant answers a Request.
type Grant struct {
	// Wait is how long from now the calls may be made: zero is at once.
	Wait time.Duration
	// Deferred, when not zero, says the request was not granted (warm
	// pool work while the schedule is full): ask again after this long.
	Deferred time.Duration
	// Pressure are the request's Subnets that some node found out of
	// addresses within Config.PressureHold: nodes on them keep no warm
	// pool and give back what their pods do not use.
	Pressure []string
	// Ticket, with Deferred, holds the request's booked slot, beyond
	// Config.Horizon: ask again with it.
	Ticket uint64
}

// Granted says the calls may be made (after Wait).
func (g Grant) Granted() bool { return g.Deferred == 0 }

// A deferred asker comes back after the schedule's backlog, at least
// minDefer (no tight loop) and at most maxDefer (its job may become
// urgent meanwhile), spread over deferSpread by node so a thousand
// deferred nodes do not come back in the same instant.
const (
	minDefer    = time.Second
	maxDefer    = 10 * time.Second
	deferSpread = time.Second
)

// Ledger is the cluster's schedule of EC2 calls, one per action, kept as
// GCRA's theoretical arrival times: a grant is a slot in a virtual
// schedule, so reservations queue up in order without anybody holding a
// connection open.
type Ledger struct {
	cfg     Config
	actions map[string]*action
	// seq counts requests, to spread deferrals of one node over time.
	seq uint64
	// term is when this Ledger's term as the cluster's schedule began
	// (StartTerm); zero if it never took over from another.
	term time.Time
	// pressure holds, per subnet, until when it is under pressure.
	pressure map[string]time.Time
	// tickets are slots booked beyond the horizon, by ticket number,
	// until their holder comes back; lastTicket numbers them.
	tickets    map[uint64]ticket
	lastTicket uint64
}

// ticket is a slot booked for a node's request beyond the horizon.
type ticket struct {
	node string
	at   time.Time
}

// ticketsPruneEvery is how many requests pass between sweeps of tickets
// nobody came back for (a job cancelled, an agent restarted), which are
// dropped maxDefer after their slot.
const ticketsPruneEvery = 1024

// action is one EC2 action's schedule.
type action struct {
	bucket Bucket
	// tat is GCRA's theoretical arrival time: the slot after the last
	// one granted.
	tat time.Time
	// factor is the fraction of the granted rate in force after the last
	// decrease (AIMD): 1 until EC2 refuses, then halved, and rate()
	// wins back (1-Floor) of it per Recovery.
	factor    float64
	decreased time.Time
	// Counters, for Stats.
	grants, deferrals, throttled uint64
}

// New returns a Ledger for cfg, which must be valid.
func New(cfg Config) *Ledger {
	if cfg.Recovery <= 0 {
		cfg.Recovery = time.Minute
	}
	if cfg.Floor == 0 {
		cfg.Floor = 0.1
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = 0.5
	}
	if cfg.PressureHold <= 0 {
		cfg.PressureHold = 10 * time.Minute
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Ledger{cfg: cfg, actions: map[string]*action{}, pressure: map[string]time.Time{}, tickets: map[uint64]ticket{}}
}

func (l *Ledger) action(name string) *action {
	a, ok := l.actions[name]
	if !ok {
		b, ok := l.cfg.Buckets[name]
		if !ok {
			b = l.cfg.Default
		}
		a = &action{bucket: b, factor: 1}
		if !l.term.IsZero() {
			gap, tol := l.params(a, l.term)
			a.tat = l.term.Add(tol + gap) // empty at the term's start
		}
		l.actions[name] = a
	}
	return a
}

// rate is the fraction of the action's granted rate in force at now.
func (l *Ledger) rate(a *action, now time.Time) float64 {
	if a.factor >= 1 {
		return 1
	}
	won := (1 - l.cfg.Floor) * float64(now.Sub(a.decreased)) / float64(l.cfg.Recovery)
	return min(1, a.factor+max(won, 0))
}

// params are the action's gap between grants and how far ahead of now
// its schedule may run before a call waits (its burst). The burst is
// measured at the full rate: a halved rate spaces grants further apart
// but must not make the debt already booked worth fewer tokens.
func (l *Ledger) params(a *action, now time.Time) (gap, tolerance time.Duration) {
	full := a.bucket.Refill * l.cfg.Margin
	gap = time.Duration(float64(time.Second) / (full * l.rate(a, now)))
	burst := max(float64(a.bucket.Burst)*l.cfg.Margin-1, 0)
	return gap, time.Duration(burst * float64(time.Second) / full)
}

// throttle records EC2's refusal of an action: its rate halves, at most
// once a second (the refusals of one wave, reported by many nodes, are
// one decrease).
func (l *Ledger) throttle(a *action, now time.Time) {
	a.throttled++
	r := l.rate(a, now)
	if !a.decreased.IsZero() && now.Sub(a.decreased) < time.Second {
		return
	}
	a.factor, a.decreased = max(r/2, l.cfg.Floor), now
}

// StartTerm says this Ledger takes over the cluster's schedule at now
// from another (a new leader after a failover): the previous one may
// have granted every bucket's burst just before it stopped, so each
// bucket is taken as empty at now and refills from there.
func (l *Ledger) StartTerm(now time.Time) {
	l.term = now
	for _, a := range l.actions {
		gap, tol := l.params(a, now)
		a.tat = maxTime(a.tat, now.Add(tol+gap))
	}
}

// Reserve answers a request at now. An urgent request always gets a
// slot, possibly in the future; any other is granted only when every
// action has a slot free now with the reserve left over, and otherwise
// told when to ask again.
func (l *Ledger) Reserve(now time.Time, r Request) Grant {
	g := l.reserve(now, r)
	g.Pressure = l.underPressure(now, r)
	return g
}

// underPressure records the subnets r found exhausted and answers which
// of r's subnets are under pressure.
func (l *Ledger) underPressure(now time.Time, r Request) []string {
	for _, s := range r.Exhausted {
		l.pressure[s] = now.Add(l.cfg.PressureHold)
	}
	var out []string
	for s, until := range l.pressure {
		if !now.Before(until) {
			delete(l.pressure, s)
		} else if slices.Contains(r.Subnets, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func (l *Ledger) reserve(now time.Time, r Request) Grant {
	l.seq++
	for _, name := range r.Throttled {
		l.throttle(l.action(name), now)
	}
	if l.seq%ticketsPruneEvery == 0 {
		for id, t := range l.tickets {
			if now.Sub(t.at) > maxDefer {
				delete(l.tickets, id)
			}
		}
	}
	if len(r.Actions) == 0 {
		return Grant{}
	}
	// A ticket this Ledger gave holds a booked slot; one it does not
	// know (a previous leader's, or dropped) is asked afresh.
	if t, ok := l.tickets[r.Ticket]; ok && r.Ticket != 0 && t.node == r.Node {
		if d := t.at.Sub(now); d > l.cfg.Horizon {
			return Grant{Deferred: d - l.cfg.Horizon/2, Ticket: r.Ticket} // came back early
		}
		delete(l.tickets, r.Ticket)
		return Grant{Wait: max(t.at.Sub(now), 0)}
	}
	at := now
	for _, name := range r.Actions {
		a := l.action(name)
		_, tol := l.params(a, now)
		if !r.Urgent {
			tol = time.Duration(float64(tol) * (1 - l.cfg.Reserve))
		}
		if s := maxTime(a.tat, now).Add(-tol); s.After(at) {
			at = s
		}
	}
	if !r.Urgent && at.After(now) {
		for _, name := range r.Actions {
			l.action(name).deferrals++
		}
		return Grant{Deferred: min(max(at.Sub(now), minDefer), maxDefer) + spread(r.Node, l.seq)}
	}
	// Each action's slot is where the calls are made, at: an action
	// whose own schedule had room sooner must not hand that room out
	// again before at, or its calls would bunch up behind this one.
	for _, name := range r.Actions {
		a := l.action(name)
		gap, _ := l.params(a, now)
		a.tat = maxTime(a.tat, at).Add(gap)
		a.grants++
	}
	if d := at.Sub(now); l.cfg.Horizon > 0 && d > l.cfg.Horizon {
		// Booked, not granted: the holder comes back half a horizon
		// before its slot and is granted it then.
		l.lastTicket++
		l.tickets[l.lastTicket] = ticket{node: r.Node, at: at}
		return Grant{Deferred: d - l.cfg.Horizon/2, Ticket: l.lastTicket}
	}
	return Grant{Wait: at.Sub(now)}
}

// ActionStats is one action's schedule, for metrics and status.
type ActionStats struct {
	Action string `json:"action"`
	// Backlog is how far ahead of now the schedule is booked.
	Backlog time.Duration `json:"backlog"`
	// Rate is the grants per second in force (AIMD included).
	Rate      float64 `json:"rate"`
	Grants    uint64  `json:"grants"`
	Deferrals uint64  `json:"deferrals"`
	Throttled uint64  `json:"throttled"`
}

// Stats lists every action the Ledger has seen, at now.
func (l *Ledger) Stats(now time.Time) []ActionStats {
	out := make([]ActionStats, 0, len(l.actions))
	for name, a := range l.actions {
		gap, _ := l.params(a, now)
		out = append(out, ActionStats{
			Action: name, Backlog: max(a.tat.Sub(now), 0), Rate: float64(time.Second) / float64(gap),
			Grants: a.grants, Deferrals: a.deferrals, Throttled: a.throttled,
		})
	}
	slices.SortFunc(out, func(a, b ActionStats) int { return strings.Compare(a.Action, b.Action) })
	return out
}

// ValidAction accepts EC2 action names: a capital letter, then letters
// and digits, at most 64 (CreateNetworkInterface).
func ValidAction(a string) bool {
	if a == "" || len(a) > 64 || a[0] < 'A' || a[0] > 'Z' {
		return false
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// spread is a deterministic share of deferSpread for node's seq-th
// request (FNV-1a): the Ledger stays a pure function of its inputs.
func spread(node string, seq uint64) time.Duration {
	h := uint64(14695981039346656037) ^ seq
	for i := 0; i < len(node); i++ {
		h ^= uint64(node[i])
		h *= 1099511628211
	}
	return time.Duration(h % uint64(deferSpread))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
