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
// account), the agents say so, and the Ledger lowers that action's rate
// to what the other clients left since the refusal before (halving it
// when it cannot tell), then wins it back a little at a time.
//
// The Ledger is pure: no I/O, no clock of its own, no goroutine. The
// controller (cmd/vpcnet-budget) serves it over HTTP to the agents, and
// package scale runs it in simulated time.
package budget

import (
	"cmp"
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
	// (additive increase), and how long a rate set to what the account's
	// other clients leave holds before it starts to, four times slower
	// (shareClimb). Default 60 s.
	Recovery time.Duration
	// Floor is the lowest fraction of the granted rate a refusal takes it
	// down to. Default 0.1.
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
	// one: its slot was booked then. Agents before SlotMs send it
	// alone; a ticket without its slot is booked afresh.
	Ticket uint64 `json:"ticket,omitempty"`
	// SlotMs, with Ticket, is when that slot falls, in milliseconds
	// from now (negative: it passed while the request was held). A
	// ticket carries its slot, so the leader that grants it need not be
	// the one that booked it: after a failover the next leader grants
	// the previous one's tickets in their order, where it would have
	// booked them afresh behind everything asked since.
	SlotMs *int64 `json:"slotMs,omitempty"`
	// Ask numbers the job's request among the node's, the same every
	// time the job asks: a leader that gathers the requests held through
	// its takeover (Term.Gather) answers each by it when it comes back.
	Ask uint64 `json:"ask,omitempty"`
	// AgeMs is how long the request has been needed: the longer of how
	// long the client has held it for want of a leader (a failover) and
	// how long the node's longest-waiting pod has waited for it. A new
	// leader books what it gathers at its term's start oldest first.
	AgeMs int64 `json:"ageMs,omitempty"`
}

// MaxSlot bounds a ticket's slot either side of now: a schedule booked
// further ahead than an hour is a fault, not a join.
const MaxSlot = time.Hour

// SlotMs is Request.SlotMs for a ticket whose slot falls at slot, asked
// at now (within MaxSlot).
func SlotMs(slot, now time.Time) *int64 {
	ms := min(max(slot.Sub(now), -MaxSlot), MaxSlot).Milliseconds()
	return &ms
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
	// Config.Horizon: ask again with it and with Slot.
	Ticket uint64
	// Slot, with Ticket, is when the booked slot falls, from now.
	Slot time.Duration
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
	// term is how this Ledger took over the cluster's schedule from
	// another (StartTerm); its zero value if it never did.
	term Term
	// firstTicket is the number of this term's first ticket: lower ones
	// are the previous leader's.
	firstTicket uint64
	// pressure holds, per subnet, until when it is under pressure.
	pressure map[string]time.Time
	// tickets are the slots this Ledger charged to the buckets ahead of
	// the horizon (a ticket that came back to find the calls granted
	// running behind its slot), by number, until their holders come
	// back for them; lastTicket numbers every ticket.
	tickets    map[uint64]ticket
	lastTicket uint64
	// gatherUntil is when this term's gathering ends (Term.Gather);
	// zero once it is booked. asks are the requests gathered, by node
	// and number, until their holders come back for their slots.
	gatherUntil time.Time
	asks        map[askKey]*gathered
	// queue is the requests gathered, in the order booked, while their
	// slots lie ahead: a request older than some of them that comes
	// after the gathering takes its place among them (queueLate).
	queue []*gathered
}

type askKey struct {
	node string
	ask  uint64
}

// gathered is a request gathered at the start of a term.
type gathered struct {
	// asked is when it was first needed (Request.AgeMs before it came).
	asked   time.Time
	actions []string
	// slot is where it was booked once the gathering ended; zero before.
	slot time.Time
	// booked says it is a previous leader's ticket, already in the
	// schedule (gatherTicket): asked is its slot.
	booked bool
}

// ticket is a slot charged for a node's request beyond the horizon.
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
	// tat is GCRA's theoretical arrival time of the calls granted: the
	// slot after the last one. It is what EC2's bucket will have seen,
	// and no grant may come before tat less the burst.
	tat time.Time
	// booked is the same for the schedule booked, tickets beyond the
	// horizon included (booked >= tat): a new request's place. A ticket
	// is charged to tat only when its holder comes back for it, so the
	// calls granted stay within the bucket whoever booked the tickets
	// (this leader or the one before) and whether or not their holders
	// come back.
	booked time.Time
	// shift is how much later than their slots the previous leader's
	// tickets are granted in this term (StartTerm).
	shift time.Duration
	// factor is the fraction of the granted rate in force after the last
	// decrease: 1 until EC2 refuses, then what the account's other
	// clients leave (share), or half when that is not known yet; rate()
	// wins back (1-Floor) of the granted rate per climb from recover on.
	factor  float64
	recover time.Time
	climb   time.Duration
	// since is the span from the last decrease, over which the next
	// refusal measures the other clients' spend (share).
	since span
	// Counters, for Stats.
	grants, deferrals, throttled uint64
}

// span is an action's bucket from a decrease (a refusal) on: the
// action's counters then, to tell what the cluster spent of it since.
type span struct {
	from              time.Time
	grants, throttled uint64
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
	return &Ledger{cfg: cfg, actions: map[string]*action{}, pressure: map[string]time.Time{}, tickets: map[uint64]ticket{}, asks: map[askKey]*gathered{}}
}

func (l *Ledger) action(name string) *action {
	a, ok := l.actions[name]
	if !ok {
		b, ok := l.cfg.Buckets[name]
		if !ok {
			b = l.cfg.Default
		}
		a = &action{bucket: b, factor: 1}
		if !l.term.Now.IsZero() {
			l.takeOver(name, a)
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
	won := (1 - l.cfg.Floor) * float64(now.Sub(a.recover)) / float64(a.climb)
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

// shareSpan is the shortest span a refusal measures the account's other
// spend over: the refusals of one wave reach the Ledger over a few
// seconds (each node reports them at its next request, and calls granted
// up to a horizon before the decrease are still made), so a shorter span
// would measure the wave's tail, not the other clients.
const shareSpan = 10 * time.Second

// shareClimb is how many times slower than a halved rate a measured one
// is won back (Config.Recovery). The cluster wins every race for a token
// against a client that calls at an even pace (its grants are spaced at
// the refill), so a rate climbing past what the others leave is not
// refused: the others are, and the Ledger cannot hear it. Climbing back
// in a minute, a shared account's other client was refused on 18% of
// its calls in a 1,000-node join; in four, on 4% (BENCHMARKS.md, a
// shared account).
const shareClimb = 4

// throttle records EC2's refusal of an action, a moment its bucket was
// empty. Measured from the refusal before (share), the rate falls to
// what the account's other clients leave, holds there for Recovery, and
// is won back shareClimb times slower than a halved rate; it falls by
// half at most, and by half when there is no measure (the first
// refusal), and is won back from then on (AIMD). The refusals of one
// wave, which nodes report at their next requests over several seconds,
// are one decrease: each report a second after the last halved the rate
// again, one wave took it to its floor, and a shared account's join ran
// at a fraction of what the other client left (BENCHMARKS.md, a shared
// account).
func (l *Ledger) throttle(a *action, now time.Time) {
	a.throttled++
	if !a.since.from.IsZero() && now.Sub(a.since.from) < shareSpan {
		return
	}
	r := l.rate(a, now)
	if f, ok := l.share(a, now); ok {
		a.factor, a.recover, a.climb = max(min(f, r), r/2, l.cfg.Floor), now.Add(l.cfg.Recovery), shareClimb*l.cfg.Recovery
	} else {
		a.factor, a.recover, a.climb = max(r/2, l.cfg.Floor), now, l.cfg.Recovery
	}
	a.since = span{from: now, grants: a.grants, throttled: a.throttled}
}

// share is the fraction of the action's refill that the account's other
// clients left from the last refusal to this one: the bucket was empty
// at both, so what EC2 refilled between them, less the calls granted
// here (less those EC2 refused, which took no token), is what the
// others spent. Granted at Margin of the rest, the cluster leaves them
// their spend and the bucket refills a little. A span in which the
// bucket stood full counts refill nobody took as the others' spend: the
// measure errs towards granting too little. ok false: no refusal before,
// or too soon to tell.
func (l *Ledger) share(a *action, now time.Time) (float64, bool) {
	d := now.Sub(a.since.from)
	if a.since.from.IsZero() || d < shareSpan {
		return 0, false
	}
	own := float64(a.grants-a.since.grants) - float64(a.throttled-a.since.throttled)
	other := max(a.bucket.Refill*d.Seconds()-max(own, 0), 0) / d.Seconds()
	return max(a.bucket.Refill-other, 0) / a.bucket.Refill, true
}

// Term is how a Ledger takes over the cluster's schedule from another (a
// new leader after a failover).
type Term struct {
	// Now is when the term starts.
	Now time.Time
	// EmptyAt is when each bucket is taken as empty: the previous
	// leader may have granted every burst just before it stopped, and
	// its grants ended by EmptyAt at the latest.
	EmptyAt time.Time
	// Stopped is when the previous leader stopped granting at the
	// earliest (its last renewal of the Lease): its tickets' slots from
	// then on were not granted, and their holders come back with them.
	Stopped time.Time
	// Booked is how far the previous leader had booked each action (its
	// Booked, as its last renewal of the Lease carried it; nil if
	// unknown).
	Booked map[string]time.Time
	// LastTicket is the number of the last ticket the previous leader
	// had handed out at that renewal (its Promise; zero if unknown). A
	// ticket of its numbered above was booked after it, so Booked does
	// not hold it, and this term may have booked its slot again: it is
	// placed among the requests gathered by its age instead.
	LastTicket uint64
	// Gather is how long from Now urgent requests are gathered, not
	// booked, and then booked oldest first (Request.AgeMs): every
	// client that held its jobs through the takeover asks again within
	// it (budgetapi.TermGather). Booked as they came back, the requests
	// of a takeover were granted in the order of their clients' retries,
	// and a pod whose node asked just after the leader died waited the
	// takeover and the whole takeover's requests besides. Zero: none.
	Gather time.Duration
}

// StartTerm says this Ledger takes over the cluster's schedule. Each
// bucket is taken as empty at t.EmptyAt and refills from there. The
// previous leader's schedule resumes where it stopped, later by the
// takeover less the refill of the buckets since: its tickets are granted
// that much after their slots, in their order (a ticket held through the
// takeover, slot passed, is granted at once only while the refill covers
// those before it), and new requests are booked after it, as the
// previous leader would have booked them. Without it the tickets of a
// join, booked minutes ahead, came back to find the schedule given to
// requests asked after them.
func (l *Ledger) StartTerm(t Term) {
	l.term = t
	// Numbered apart from the previous leader's tickets (numbered from
	// its own term's start), which come back too.
	l.firstTicket = max(l.lastTicket, uint64(max(t.Now.UnixNano(), 0))) + 1
	l.lastTicket = l.firstTicket - 1
	l.gatherUntil, l.asks, l.queue = time.Time{}, map[askKey]*gathered{}, nil
	if t.Gather > 0 {
		l.gatherUntil = t.Now.Add(t.Gather)
	}
	for name, a := range l.actions {
		l.takeOver(name, a)
	}
}

// takeOver starts a's schedule in this term (StartTerm). The slots the
// previous leader booked from when it stopped to the term's start are
// still to be granted; the bucket holds the refill since EmptyAt, at
// most its burst. Shifted by the rest, they fit.
func (l *Ledger) takeOver(name string, a *action) {
	t := l.term
	gap, tol := l.params(a, t.Now)
	a.tat = maxTime(a.tat, t.EmptyAt.Add(tol+gap))
	a.shift = 0
	if !t.Stopped.IsZero() {
		a.shift = max(t.Now.Sub(t.Stopped)-min(t.Now.Sub(t.EmptyAt), tol), 0)
	}
	a.booked = maxTime(a.booked, a.tat)
	if b, ok := t.Booked[name]; ok {
		a.booked = maxTime(a.booked, b.Add(a.shift))
	}
}

// Promise is what a leader writes into its Lease at each renewal for
// the next leader (Term.Booked and Term.LastTicket).
type Promise struct {
	Booked     map[string]time.Time
	LastTicket uint64
}

// Promise is the schedule booked at now and the last ticket it holds.
func (l *Ledger) Promise(now time.Time) Promise {
	return Promise{Booked: l.Booked(now), LastTicket: l.lastTicket}
}

// Renewal is what a leader promises when it renews its Lease: per
// action the later of what the Lease said before (read: the promise it
// took over, which its own schedule may not hold yet) and its own
// booked schedule, and its own last ticket (numbered above every
// earlier leader's: StartTerm).
func Renewal(read, own Promise) Promise {
	out := make(map[string]time.Time, len(read.Booked)+len(own.Booked))
	for _, m := range []map[string]time.Time{read.Booked, own.Booked} {
		for a, t := range m {
			if t.After(out[a]) {
				out[a] = t
			}
		}
	}
	return Promise{Booked: out, LastTicket: own.LastTicket}
}

// Booked is how far each action's schedule is booked: the promise the
// next leader must honour (Term.Booked). Actions booked no further
// than now are left out.
func (l *Ledger) Booked(now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for name, a := range l.actions {
		if a.booked.After(now) {
			out[name] = a.booked
		}
	}
	return out
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
		l.prune(now)
	}
	if len(r.Actions) == 0 {
		return Grant{}
	}
	if t, ok := l.tickets[r.Ticket]; ok && r.Ticket != 0 && t.node == r.Node {
		if d := t.at.Sub(now); d > l.cfg.Horizon {
			return Grant{Deferred: d - l.cfg.Horizon/2, Ticket: r.Ticket, Slot: d} // came back early
		}
		delete(l.tickets, r.Ticket)
		return Grant{Wait: max(t.at.Sub(now), 0)}
	}
	if r.SlotMs != nil && r.Ticket != 0 {
		slot, previous := now.Add(time.Duration(*r.SlotMs)*time.Millisecond), r.Ticket < l.firstTicket
		if previous {
			if l.term.LastTicket != 0 && r.Ticket > l.term.LastTicket {
				if g, ok := l.unpromised(now, r); ok {
					return g
				}
			}
			if g, ok := l.gatherTicket(now, r, l.shifted(r.Actions, slot)); ok {
				return g
			}
		}
		return l.redeem(now, r, slot, previous)
	}
	if g, ok := l.gather(now, r); ok {
		return g
	}
	at := l.place(now, r.Actions, r.Urgent)
	if !r.Urgent && at.After(now) {
		for _, name := range r.Actions {
			l.action(name).deferrals++
		}
		return Grant{Deferred: min(max(at.Sub(now), minDefer), maxDefer) + spread(r.Node, l.seq)}
	}
	l.book(now, r.Actions, at)
	if g, ok := l.ticket(now, at); ok {
		return g
	}
	return l.grant(now, r.Actions, at)
}

// prune drops the tickets and gathered requests nobody came back for (a
// job cancelled, an agent restarted) maxDefer after their slots.
func (l *Ledger) prune(now time.Time) {
	for id, t := range l.tickets {
		if now.Sub(t.at) > maxDefer {
			delete(l.tickets, id)
		}
	}
	for k, g := range l.asks {
		if !g.slot.IsZero() && now.Sub(g.slot) > maxDefer {
			delete(l.asks, k)
		}
	}
}

// place is where a request for actions asked at now goes in the
// schedule: after what is booked, less the burst for an urgent request,
// less the burst without the reserve for warm-pool work.
func (l *Ledger) place(now time.Time, actions []string, urgent bool) time.Time {
	at := now
	for _, name := range actions {
		a := l.action(name)
		_, tol := l.params(a, now)
		if !urgent {
			tol = time.Duration(float64(tol) * (1 - l.cfg.Reserve))
		}
		if s := maxTime(a.booked, now).Add(-tol); s.After(at) {
			at = s
		}
	}
	return at
}

// book takes the slot at in each action's schedule. Each action's slot
// is where the calls are made, at: an action whose own schedule had room
// sooner must not hand that room out again before at, or its calls would
// bunch up behind this one.
func (l *Ledger) book(now time.Time, actions []string, at time.Time) {
	for _, name := range actions {
		a := l.action(name)
		gap, _ := l.params(a, now)
		a.booked = maxTime(a.booked, at).Add(gap)
	}
}

// gather answers a request of a term's gathering (Term.Gather): while it
// lasts, an urgent request is noted with when it was first needed and
// told to come back when it ends, and warm-pool work to wait till then;
// once it ends, the requests gathered are booked oldest first, and each
// is handed its slot when it comes back for it; a later urgent request
// older than some of them goes among them (queueLate). ok false: r is
// booked as it comes.
func (l *Ledger) gather(now time.Time, r Request) (g Grant, ok bool) {
	if !l.gatherUntil.IsZero() && !now.Before(l.gatherUntil) {
		l.bookGathered(now)
	}
	// back tells a request of the gathering to come back when it ends.
	back := func() Grant {
		return Grant{Deferred: l.gatherUntil.Sub(now) + spread(r.Node, l.seq)/gatherSpread}
	}
	k := askKey{r.Node, r.Ask}
	if h, ok := l.asks[k]; ok && r.Ask != 0 {
		if h.slot.IsZero() {
			return back(), true
		}
		delete(l.asks, k)
		return l.handOut(now, r, h.slot, gatherLead), true
	}
	age := time.Duration(min(max(r.AgeMs, 0), MaxSlot.Milliseconds())) * time.Millisecond
	if l.gatherUntil.IsZero() {
		if r.Urgent && r.Ask != 0 {
			return l.queueLate(now, r, now.Add(-age))
		}
		return Grant{}, false
	}
	if r.Urgent && r.Ask != 0 {
		l.asks[k] = &gathered{asked: now.Add(-age), actions: slices.Clone(r.Actions)}
	} else if r.Urgent {
		return Grant{}, false // a client that sends no Ask is booked as it comes
	}
	return back(), true
}

// unpromised answers a ticket the previous leader booked after its last
// promise (Term.LastTicket): the schedule this term took over does not
// hold it, and the requests gathered at the term's start were booked
// over its slot. Granted at its slot, it and they shared the same slots
// and each was granted behind the other: a 300-node join whose leader
// died 10 s in had the last leader's promise 8 s of assigns short, and
// 34 pods waited past the takeover and an attach. It is gathered by its
// age like any request held through the takeover: noted while the
// gathering lasts, placed among the gathered requests after (queueLate).
// ok false: it is older than every request still ahead (or sends no
// Ask), and keeps its slot.
func (l *Ledger) unpromised(now time.Time, r Request) (Grant, bool) {
	r.Ticket, r.SlotMs = 0, nil
	return l.gather(now, r)
}

// gatherTicket answers a previous leader's ticket, its slot shifted to
// at, that comes back during the gathering: noted, and handed a slot
// when its holder comes back after it, in the order of the slots (the
// tickets that come back during the gathering are those held through
// the takeover and those due just after it). Redeemed as they came, the
// tickets held through the takeover were granted in the order of their
// holders' retries, each on its own two-second phase, not of their
// slots: a start-up read granted two seconds after its neighbours' put
// the node's assign behind a hundred others (300 nodes, leader dead 3 s
// into the join: 795 pods past the takeover plus an attach, 208 gathered).
// ok false: not in the gathering, or a request that cannot come back to
// it (not urgent, or no Ask).
func (l *Ledger) gatherTicket(now time.Time, r Request, at time.Time) (Grant, bool) {
	if l.gatherUntil.IsZero() || !now.Before(l.gatherUntil) || !r.Urgent || r.Ask == 0 {
		return Grant{}, false
	}
	k := askKey{r.Node, r.Ask}
	if _, ok := l.asks[k]; !ok {
		l.asks[k] = &gathered{asked: at, actions: slices.Clone(r.Actions), booked: true}
	}
	return Grant{Deferred: l.gatherUntil.Sub(now) + spread(r.Node, l.seq)/gatherSpread}, true
}

// handOut gives r the slot booked for it at its term's gathering: a
// ticket to come back with lead before it, or the grant.
func (l *Ledger) handOut(now time.Time, r Request, slot time.Time, lead time.Duration) Grant {
	if d := slot.Sub(now); d > lead {
		l.lastTicket++
		return Grant{Deferred: d - lead, Ticket: l.lastTicket, Slot: d}
	}
	return l.redeem(now, r, slot, false)
}

// queueLate books r, first needed at asked and come after the gathering,
// in its place among the requests gathered whose slots lie ahead: at the
// slot of the first younger one that calls one of its actions, which the
// buckets then grant a gap later, and so on behind it (each comes back
// for its slot and is granted as the buckets allow). A job asked
// because a job held through the takeover came back (the ENI after the
// assign), or a job whose holder came back late, keeps its pods' place.
// ok false: no younger request is left ahead; r is booked as it comes.
func (l *Ledger) queueLate(now time.Time, r Request, asked time.Time) (Grant, bool) {
	i := 0
	for i < len(l.queue) && !l.queue[i].slot.After(now.Add(gatherLead)) {
		i++ // granted or about to be: its place is taken
	}
	l.queue = l.queue[i:]
	j := slices.IndexFunc(l.queue, func(g *gathered) bool {
		return g.asked.After(asked) && slices.ContainsFunc(g.actions, func(a string) bool { return slices.Contains(r.Actions, a) })
	})
	if j < 0 {
		return Grant{}, false
	}
	g := &gathered{asked: asked, actions: slices.Clone(r.Actions), slot: l.queue[j].slot}
	l.queue = slices.Insert(l.queue, j, g)
	l.book(now, r.Actions, g.slot)
	// Back before the request whose slot it took, so the buckets grant
	// it there and the other a gap later.
	return l.handOut(now, r, g.slot, 2*gatherLead), true
}

// gatherLead is how long before its slot the holder of a gathered
// request is granted it. The slots are charged to the buckets as their
// holders come for them, and GCRA charges a later slot before an earlier
// one at the earlier one's cost: all told their slots at once, the
// holders back first took the burst and the order was the order of
// coming back again. Each is given a ticket instead, and comes back with
// it just before its slot, in the slots' order (the ticket carries the
// slot through another failover).
const gatherLead = 20 * time.Millisecond

// ticketStep spaces the slots of the previous leader's tickets gathered
// at a term's start (gatherTicket), so that their holders come back, and
// are granted, in their order, and what each node asks next (a call's
// latency after its grant) reaches the Ledger in the same order: handed
// slots a microsecond apart, the early kills of the 300-node failover
// left 384 to 552 pods past the takeover plus an attach, against 131 to
// 238 at 5 ms.
const ticketStep = 5 * time.Millisecond

// gatherSpread divides deferSpread for the holders of gathered requests:
// they come back within a quarter of a second of the gathering's end.
const gatherSpread = 4

// bookGathered ends the term's gathering: the previous leader's tickets
// gathered are handed slots in their slots' order, and the other
// requests are booked behind them in the order they were first asked,
// none before every holder is back (a slot passed when its holder comes
// back is granted as the buckets allow then: see gatherLead).
func (l *Ledger) bookGathered(now time.Time) {
	first := l.gatherUntil.Add(deferSpread / gatherSpread)
	l.gatherUntil = time.Time{}
	keys := make([]askKey, 0, len(l.asks))
	for k, g := range l.asks {
		if g.slot.IsZero() {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b askKey) int {
		if c := l.asks[a].asked.Compare(l.asks[b].asked); c != 0 {
			return c
		}
		if c := strings.Compare(a.node, b.node); c != 0 {
			return c
		}
		return cmp.Compare(a.ask, b.ask)
	})
	l.queue = l.queue[:0]
	// The previous leader's tickets first (they are in the schedule
	// already), in their slots' order, each ticketStep after the one
	// before at least.
	var last time.Time
	after := map[string]time.Time{}
	for _, k := range keys {
		if g := l.asks[k]; g.booked {
			g.slot = maxTime(maxTime(g.asked, first), last.Add(ticketStep))
			last = g.slot
			for _, a := range g.actions {
				after[a] = g.slot.Add(ticketStep)
			}
		}
	}
	// Then the rest, oldest first, each behind those tickets for its
	// actions, however long its pods have waited: the previous leader
	// booked the tickets before the request was asked (or, for a ticket
	// booked after its last promise, before that ticket), and would have
	// booked it behind them. The schedule's place for it is behind them
	// (GCRA's slots are in the order booked), but the tickets were just
	// handed slots ticketStep apart from the gathering's end, after
	// their own: handed the gathering's end, the held jobs of a 300-node
	// join whose leader died 3 s in were granted ahead of the tickets,
	// and the next job of each ticket's node (its ENI) came behind
	// theirs: 208 pods waited past the takeover plus an attach.
	for _, k := range keys {
		if g := l.asks[k]; !g.booked {
			g.slot = maxTime(l.place(now, g.actions, true), first)
			for _, a := range g.actions {
				g.slot = maxTime(g.slot, after[a])
			}
			l.book(now, g.actions, g.slot)
			l.queue = append(l.queue, g)
		}
	}
}

// ticket defers a request whose slot, at, lies beyond the horizon: it is
// booked, not granted, and its holder comes back half a horizon before
// the slot, with it.
func (l *Ledger) ticket(now, at time.Time) (Grant, bool) {
	d := at.Sub(now)
	if l.cfg.Horizon == 0 || d <= l.cfg.Horizon {
		return Grant{}, false
	}
	l.lastTicket++
	return Grant{Deferred: d - l.cfg.Horizon/2, Ticket: l.lastTicket, Slot: d}, true
}

// grant charges the calls of actions, at at, to the buckets.
func (l *Ledger) grant(now time.Time, actions []string, at time.Time) Grant {
	for _, name := range actions {
		a := l.action(name)
		gap, _ := l.params(a, now)
		a.tat = maxTime(a.tat, at).Add(gap)
		a.booked = maxTime(a.booked, a.tat)
		a.grants++
	}
	return Grant{Wait: at.Sub(now)}
}

// redeem answers a ticket's holder coming back for a slot booked but not
// charged to the buckets (a ticket of this Ledger's, or of the previous
// leader's): granted at the slot, or as soon after it as the buckets
// allow (a failover held it past its slot, or the calls granted run
// behind the schedule booked). Tickets come back in the order of their
// slots, so they are granted in the order they were booked, whichever
// leader booked them.
func (l *Ledger) redeem(now time.Time, r Request, slot time.Time, previous bool) Grant {
	if previous {
		slot = l.shifted(r.Actions, slot)
	}
	at := maxTime(slot, now)
	for _, name := range r.Actions {
		a := l.action(name)
		_, tol := l.params(a, now)
		at = maxTime(at, a.tat.Add(-tol))
	}
	d := at.Sub(now)
	if l.cfg.Horizon == 0 || d <= l.cfg.Horizon {
		return l.grant(now, r.Actions, at)
	}
	l.lastTicket++ // of this term: its slot is of this term's schedule
	if !at.Equal(slot) {
		// The calls granted run more than a horizon behind: the slot
		// after them is charged now, so the holder finds it when it
		// comes back. Deferred again uncharged, it came back to find
		// the slots given to tickets that came back before it, every
		// time.
		l.grant(now, r.Actions, at)
		l.tickets[l.lastTicket] = ticket{node: r.Node, at: at}
	}
	// Otherwise it came back early: its slot holds.
	return Grant{Deferred: d - l.cfg.Horizon/2, Ticket: l.lastTicket, Slot: d}
}

// shifted is when this term grants a previous leader's ticket for
// actions booked at slot (StartTerm).
func (l *Ledger) shifted(actions []string, slot time.Time) time.Time {
	var shift time.Duration
	for _, name := range actions {
		shift = max(shift, l.action(name).shift)
	}
	return slot.Add(shift)
}

// ActionStats is one action's schedule, for metrics and status.
type ActionStats struct {
	Action string `json:"action"`
	// Backlog is how far ahead of now the schedule is booked.
	Backlog time.Duration `json:"backlog"`
	// Rate is the grants per second in force (refusals' decreases
	// included).
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
			Action: name, Backlog: max(a.booked.Sub(now), 0), Rate: float64(time.Second) / float64(gap),
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
