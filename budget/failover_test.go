package budget

import (
	"container/heap"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A leader's grants are promises its successor cannot see. With the
// controller's timings (Lease 15 s, renew deadline 10 s, retry 2 s) a
// leader grants at most 4 s after its last renewal, and no further ahead
// than the horizon (3 s); the standby takes over 15 s after that renewal
// at the soonest and takes the buckets as empty from 7 s before its term
// (controller.Settings.Horizon, with a second for a job's calls): the
// refill since the last grant could run. Nodes in a join keep asking through it, each for two ENIs'
// creates and attaches in turn, holding their jobs while no leader
// answers, and EC2 must refuse none of the calls of either term. (The
// shortest gap, 3 s with the buckets empty from the term's start, is
// what the horizon alone keeps safe.) Without Config.Horizon the first
// leader's grants ran a minute past its end and the second granted the
// same tokens again.
func TestAFailoverSpendsNoBucketTwice(t *testing.T) {
	const nodes = 400
	stop := t0.Add(20 * time.Second) // the last grant
	for _, tc := range []struct {
		horizon time.Duration
		// begin is when the next term starts after the last grant,
		// empty when its buckets are taken as empty; gather is how long
		// it gathers the jobs held through the takeover.
		begin, empty, gather time.Duration
	}{
		{3 * time.Second, 11 * time.Second, 4 * time.Second, 0},
		{3 * time.Second, 11 * time.Second, 4 * time.Second, 2500 * time.Millisecond},
		{3 * time.Second, 3 * time.Second, 3 * time.Second, 2500 * time.Millisecond},
		{1500 * time.Millisecond, 3 * time.Second, 3 * time.Second, 0},
	} {
		t.Run(fmt.Sprint(tc.horizon, tc.begin, tc.empty, tc.gather), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Horizon = tc.horizon
			old, next := New(cfg), New(cfg)
			termStarted := false
			calls := failoverJoin(nodes, func(now time.Time) *Ledger {
				switch {
				case now.Before(stop):
					return old
				case now.Before(stop.Add(tc.begin)):
					return nil
				}
				if !termStarted {
					next.StartTerm(Term{Now: now, EmptyAt: stop.Add(tc.empty), Stopped: stop, Booked: old.Booked(stop), Gather: tc.gather})
					termStarted = true
				}
				return next
			})
			if len(calls) != nodes*4 {
				t.Fatalf("%d calls made; want %d (every node's two creates and two attaches)", len(calls), nodes*4)
			}
			late := 0
			for _, c := range calls {
				if c.at.After(stop.Add(tc.empty)) && c.granted == old {
					late++
				}
			}
			if late > 0 {
				t.Errorf("%d calls granted by the old leader made after the new term's buckets count as empty", late)
			}
			if at, a, ok := refused(calls); !ok {
				t.Fatalf("EC2 would refuse %s at %v (old leader's last grant at %v, new term at %v)", a, at.Sub(t0), stop.Sub(t0), stop.Add(tc.begin).Sub(t0))
			}
		})
	}
}

// A failover delays no call of a join by more than the takeover (and the
// gathering of the jobs held through it, when the next leader gathers
// them: Term.Gather): the next leader resumes the previous one's schedule, its tickets (booked up
// to a minute and a half ahead here) granted in their order and new
// requests booked after them, as the previous leader would have. The
// leader dies 60 s into a join of 400 nodes, its last renewal of the Lease
// 2 s before, and its standby leads 16 s after; the same join without a
// failover is the reference. Before the tickets carried their slots the
// next leader booked each afresh when it came back, behind the requests
// asked since: calls came up to a minute late. A ticket that came back to
// calls running behind its slot was deferred again uncharged, and found
// its slot taken every time it came back: starved.
func TestAFailoverDelaysNoCallMoreThanTheTakeover(t *testing.T) {
	const (
		nodes    = 400
		takeover = 16 * time.Second
	)
	cfg := DefaultConfig()
	cfg.Horizon = 3 * time.Second
	type key struct {
		node string
		step int
	}
	byCall := func(calls []grantedCall) map[key]time.Time {
		out := map[key]time.Time{}
		for _, c := range calls {
			out[key{c.node, c.step}] = c.at
		}
		return out
	}
	one := New(cfg)
	want := byCall(failoverJoin(nodes, func(time.Time) *Ledger { return one }))

	// A leader that gathers the jobs held through its takeover grants
	// them that much later, and a quarter second for their holders to be
	// back (gatherSpread).
	const gatherCost = deferSpread / gatherSpread
	for _, gather := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run(fmt.Sprint("gather ", gather), func(t *testing.T) {
			stop := t0.Add(time.Minute)
			renewed := stop.Add(-2 * time.Second)
			old, next := New(cfg), New(cfg)
			var promised map[string]time.Time
			started := false
			calls := failoverJoin(nodes, func(now time.Time) *Ledger {
				switch {
				case now.Before(renewed):
					return old
				case now.Before(stop):
					if promised == nil {
						promised = old.Booked(now) // the Lease's last renewal
					}
					return old
				case now.Before(stop.Add(takeover)):
					return nil
				}
				if !started {
					// controller.termOffset: the old leader's grants ended by
					// its last renewal plus fresh (4 s), the horizon and a second.
					next.StartTerm(Term{Now: now, EmptyAt: renewed.Add(8 * time.Second), Stopped: renewed, Booked: promised, Gather: gather})
					started = true
				}
				return next
			})
			if len(calls) != nodes*4 {
				t.Fatalf("%d calls made; want %d", len(calls), nodes*4)
			}
			if at, a, ok := refused(calls); !ok {
				t.Fatalf("EC2 would refuse %s at %v", a, at.Sub(t0))
			}
			var late int
			var worst time.Duration
			for k, at := range byCall(calls) {
				d := at.Sub(want[k])
				worst = max(worst, d)
				if d > takeover+gather+gatherCost {
					late++
				}
			}
			if late > 0 {
				t.Errorf("%d of %d calls came more than the takeover (%v) and the gathering (%v) later than without the failover; the worst %v", late, len(calls), takeover, gather, worst)
			}
			if last := promised["CreateNetworkInterface"].Sub(stop); last < 30*time.Second {
				t.Fatalf("the old leader had booked only %v past its death: the test does not test tickets", last)
			}
		})
	}
}

type grantedCall struct {
	call
	granted *Ledger
	// node and step say whose call it is.
	node string
	step int
}

// failoverJoin plays a join: each node asks, urgently, for a create, then
// an attach, then again, asking whichever ledger leads (nil: none, and
// the node asks again ElectionPause later, as the agents' client holds
// its jobs, saying how long it held the job), coming back when deferred
// with its ticket.
func failoverJoin(nodes int, leader func(now time.Time) *Ledger) []grantedCall {
	var q evq
	var calls []grantedCall
	steps := []string{"CreateNetworkInterface", "AttachNetworkInterface", "CreateNetworkInterface", "AttachNetworkInterface"}
	var ask func(node string, step int, ticket uint64, slot, held, now time.Time)
	ask = func(node string, step int, ticket uint64, slot, held, now time.Time) {
		l := leader(now)
		if l == nil {
			if held.IsZero() {
				held = now
			}
			q.at(now.Add(2*time.Second), func(now time.Time) { ask(node, step, ticket, slot, held, now) })
			return
		}
		r := Request{Node: node, Actions: []string{steps[step]}, Urgent: true, Ticket: ticket, Ask: uint64(step + 1)}
		if ticket != 0 {
			r.SlotMs = SlotMs(slot, now)
		}
		if !held.IsZero() {
			r.AgeMs = now.Sub(held).Milliseconds()
		}
		g := l.Reserve(now, r)
		if !g.Granted() {
			q.at(now.Add(g.Deferred), func(next time.Time) { ask(node, step, g.Ticket, now.Add(g.Slot), held, next) })
			return
		}
		at := now.Add(g.Wait)
		calls = append(calls, grantedCall{call{at, steps[step]}, l, node, step})
		if step+1 < len(steps) {
			// The call and the next step's set-up take a moment.
			q.at(at.Add(100*time.Millisecond), func(now time.Time) { ask(node, step+1, 0, time.Time{}, time.Time{}, now) })
		}
	}
	for i := range nodes {
		node := fmt.Sprintf("n%d", i)
		q.at(t0.Add(time.Duration(i)*time.Millisecond), func(now time.Time) { ask(node, 0, 0, time.Time{}, time.Time{}, now) })
	}
	q.run()
	return calls
}

// refused plays calls against EC2's buckets (DefaultConfig's, in full)
// and says which call, if any, EC2 would refuse.
func refused(calls []grantedCall) (time.Time, string, bool) {
	slices.SortStableFunc(calls, func(a, b grantedCall) int { return a.at.Compare(b.at) })
	buckets := map[string]*tokenBucket{}
	for _, c := range calls {
		b, ok := buckets[c.action]
		if !ok {
			spec := DefaultConfig().Buckets[c.action]
			b = &tokenBucket{burst: float64(spec.Burst), refill: spec.Refill}
			buckets[c.action] = b
		}
		if !b.take(c.at) {
			return c.at, c.action, false
		}
	}
	return time.Time{}, "", true
}

// clientJob plays the agents' budget client for node's one urgent job of
// actions, first asked at first: it asks whichever ledger leads (nil:
// none, and it holds the job, asking again two seconds later, on its own
// phase), comes back with its ticket when deferred with one, and says
// how long the job has been needed (age, from first and from when it
// was first held). granted hears the grant.
func clientJob(q *evq, leader func(time.Time) *Ledger, node string, actions []string, first time.Time,
	age func(now, held time.Time) time.Duration, granted func(l *Ledger, at time.Time)) {
	var held time.Time
	var ask func(now time.Time, ticket uint64, slot time.Time)
	ask = func(now time.Time, ticket uint64, slot time.Time) {
		l := leader(now)
		if l == nil {
			if held.IsZero() {
				held = now
			}
			q.at(now.Add(2*time.Second), func(now time.Time) { ask(now, ticket, slot) })
			return
		}
		r := Request{Node: node, Actions: actions, Urgent: true, Ask: 1, AgeMs: age(now, held).Milliseconds(), Ticket: ticket}
		if ticket != 0 {
			r.SlotMs = SlotMs(slot, now)
		}
		g := l.Reserve(now, r)
		if !g.Granted() {
			q.at(now.Add(g.Deferred), func(next time.Time) { ask(next, g.Ticket, now.Add(g.Slot)) })
			return
		}
		granted(l, now.Add(g.Wait))
	}
	q.at(first, func(now time.Time) { ask(now, 0, time.Time{}) })
}

// takeOver plays a leader that writes its promise into its Lease at
// promised for the last time and dies at stop, and the standby that
// takes over at term with the controller's gathering: leader says which
// answers at a time (nil: none).
func takeOver(q *evq, cfg Config, promised, stop, term time.Time) (leader func(time.Time) *Ledger) {
	old, next := New(cfg), New(cfg)
	var p Promise
	q.at(promised, func(now time.Time) { p = old.Promise(now) })
	q.at(term, func(now time.Time) {
		next.StartTerm(Term{Now: now, EmptyAt: now.Add(-7 * time.Second), Stopped: promised, Booked: p.Booked, LastTicket: p.LastTicket, Gather: 2500 * time.Millisecond})
	})
	return func(now time.Time) *Ledger {
		switch {
		case now.Before(stop):
			return old
		case now.Before(term):
			return nil
		}
		return next
	}
}

// sinceFirst is a job's age counted from its first ask: its pods have
// waited since.
func sinceFirst(first time.Time) func(now, held time.Time) time.Duration {
	return func(now, _ time.Time) time.Duration { return now.Sub(first) }
}

// ev is an event of failoverJoin's timeline; seq keeps events of one
// instant in the order they were made.
type ev struct {
	at  time.Time
	seq int
	fn  func(now time.Time)
}

type evHeap []ev

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(ev)) }
func (h *evHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// run plays the events in time order until none is left.
func (q *evq) run() {
	for q.h.Len() > 0 {
		e := heap.Pop(&q.h).(ev)
		e.fn(e.at)
	}
}

// askUntilGranted asks l for actions at now as an agent's budget client
// does, urgently, with the ticket it holds (0: none) and its slot,
// coming back when deferred with the answer's, until granted: granted
// sees when the calls may be made.
func askUntilGranted(q *evq, l *Ledger, node string, actions []string, ticket uint64, slot, now time.Time, granted func(at time.Time)) {
	r := Request{Node: node, Actions: actions, Urgent: true, Ticket: ticket}
	if ticket != 0 {
		r.SlotMs = SlotMs(slot, now)
	}
	g := l.Reserve(now, r)
	if g.Granted() {
		granted(now.Add(g.Wait))
		return
	}
	q.at(now.Add(g.Deferred), func(next time.Time) {
		askUntilGranted(q, l, node, actions, g.Ticket, now.Add(g.Slot), next, granted)
	})
}

type evq struct {
	h   evHeap
	seq int
}

func (q *evq) at(t time.Time, fn func(time.Time)) {
	q.seq++
	heap.Push(&q.h, ev{at: t, seq: q.seq, fn: fn})
}

// Tickets held through a takeover come back together to calls that run
// behind their slots: each that cannot be granted within the horizon is
// charged its place then, and granted it when it comes back. Deferred
// again uncharged, the tickets that came back first took the slots each
// time and the rest found them gone, every time: here the 77 tickets
// whose slots passed in a 20 s takeover come back together, with no
// refill to spend, and each must be granted within 78 slots and a
// horizon of the term's start, which the mutant misses.
func TestTicketsThatComeBackTogetherAreEachGrantedInTurn(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Horizon = 3 * time.Second
	create := []string{"CreateNetworkInterface"}
	old := New(cfg)
	type held struct {
		node string
		g    Grant
		at   time.Time // when the slot falls
	}
	var tickets []held
	for i := range 200 {
		node := fmt.Sprintf("n%d", i)
		g := old.Reserve(t0, Request{Node: node, Actions: create, Urgent: true})
		if g.Granted() {
			continue // the burst
		}
		tickets = append(tickets, held{node, g, t0.Add(g.Slot)})
	}
	term := t0.Add(20 * time.Second)
	next := New(cfg)
	next.StartTerm(Term{Now: term, EmptyAt: term})
	var q evq
	granted := map[string]time.Time{}
	together := 0
	for _, h := range tickets {
		back := h.at.Add(-cfg.Horizon / 2)
		if h.at.Before(term) {
			together++ // held through the takeover: back at its start
			back = term
		}
		q.at(back, func(now time.Time) {
			askUntilGranted(&q, next, h.node, create, h.g.Ticket, h.at, now, func(at time.Time) { granted[h.node] = at })
		})
	}
	q.run()
	gap := time.Second * 2 / 9
	bound := term.Add(time.Duration(together+1)*gap + cfg.Horizon)
	for _, h := range tickets[:together] {
		at, ok := granted[h.node]
		if !ok || at.After(bound) {
			t.Errorf("ticket of %s, back at the term's start with %d others: granted at %v, want by %v", h.node, together-1, at.Sub(term), bound.Sub(term))
		}
	}
	if together < 60 {
		t.Fatalf("only %d tickets came back together: the test does not test a crowd", together)
	}
}

// When EC2 refuses a call the rate halves for the calls granted from
// then on, those of tickets booked before included: a join's tickets are
// booked minutes ahead, and left at their slots they kept calling at the
// full rate into a bucket another client of the account shares, refused
// again and again (BENCHMARKS.md, a shared account: at 300 nodes the
// join took 647 s, and 197 s once the rate applied to them).
func TestAThrottleSlowsTheCallsOfTicketsBookedBeforeIt(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Horizon = 3 * time.Second
	create := []string{"CreateNetworkInterface"}
	l := New(cfg)
	var q evq
	var granted []time.Time
	for i := range 300 {
		askUntilGranted(&q, l, fmt.Sprintf("n%d", i), create, 0, time.Time{}, t0, func(at time.Time) { granted = append(granted, at) })
	}
	l.Reserve(t0.Add(time.Second), Request{Node: "n0", Throttled: create})
	q.run()
	if len(granted) != 300 {
		t.Fatalf("%d creates granted; want 300", len(granted))
	}
	// Between 10 s and 30 s the rate wins back from half towards 4.5 a
	// second (Recovery, 60 s): about 60 calls, 90 at the full rate.
	n := 0
	for _, at := range granted {
		if !at.Before(t0.Add(10*time.Second)) && at.Before(t0.Add(30*time.Second)) {
			n++
		}
	}
	if n > 75 {
		t.Errorf("%d creates granted from 10 s to 30 s after a refusal; want at most 75 (90 is the full rate: the refusal did not slow them)", n)
	}
}

// Every client that held its job through a takeover asks the new leader
// within one retry of its term, in the order of its retries, not of its
// asking. Gathered for Term.Gather and booked oldest first, the jobs are
// granted in the order they were first asked: here 120 nodes ask one
// after another through a 16 s takeover, each retrying every 2 s from
// its own first ask, so the retries reach the new leader in an order
// unrelated to their age. Booked as they came back, a job asked just
// after the leader died was granted behind jobs asked 15 s after it. A
// job asked only after the gathering, for pods that waited since 5 s
// into the takeover (an ENI asked once a held assign came back), takes
// its place among them too: booked as it came, it waited for every one.
func TestJobsHeldThroughATakeoverAreGrantedInTheOrderFirstAsked(t *testing.T) {
	const (
		nodes  = 120
		gather = 2500 * time.Millisecond
	)
	cfg := DefaultConfig()
	cfg.Horizon = 3 * time.Second
	create := []string{"CreateNetworkInterface"}
	stop := t0
	term := stop.Add(16 * time.Second)
	l := New(cfg)
	l.StartTerm(Term{Now: term, EmptyAt: term, Stopped: stop, Gather: gather})
	var q evq
	granted := make([]time.Time, nodes+1)
	var calls []grantedCall
	leader := func(now time.Time) *Ledger {
		if now.Before(term) {
			return nil
		}
		return l
	}
	// job i is first needed at first and first asked at asked.
	job := func(i int, first, asked time.Time) {
		node := fmt.Sprintf("n%d", i)
		clientJob(&q, leader, node, create, asked, sinceFirst(first), func(l *Ledger, at time.Time) {
			granted[i] = at
			calls = append(calls, grantedCall{call{at, create[0]}, l, node, 0})
		})
	}
	firstOf := func(i int) time.Time { return stop.Add(time.Duration(i) * 130 * time.Millisecond) }
	for i := range nodes {
		job(i, firstOf(i), firstOf(i))
	}
	lateFirst, lateAsked := stop.Add(5*time.Second), term.Add(gather+time.Second)
	job(nodes, lateFirst, lateAsked)
	q.run()
	if at, a, ok := refused(calls); !ok {
		t.Fatalf("EC2 would refuse %s at %v", a, at.Sub(t0))
	}
	for i := 1; i < nodes; i++ {
		if granted[i].Before(granted[i-1]) {
			t.Errorf("n%d, asked %v after n%d, was granted %v before it", i, 130*time.Millisecond, i-1, granted[i-1].Sub(granted[i]))
		}
	}
	if late := granted[0].Sub(term); late > gather+time.Second {
		t.Errorf("the oldest job was granted %v into the term; want within the gathering (%v) and a second", late, gather)
	}
	behind := 0
	for i := range nodes {
		if firstOf(i).After(lateFirst) && granted[i].After(lateAsked.Add(time.Second)) && granted[i].Before(granted[nodes]) {
			behind++
		}
	}
	if behind > 0 {
		t.Errorf("the job asked after the gathering, needed since %v into the takeover, was granted %v into the term, behind %d jobs needed after it and granted over a second after it asked",
			lateFirst.Sub(stop), granted[nodes].Sub(term), behind)
	}
}

// A leader writes its promise into its Lease every two seconds, and what
// it books between a renewal and its death is in no promise the next
// leader reads: here 40 assigns asked after the last renewal, a second
// before the leader died. The next leader books the jobs held through
// its takeover from the end of the promise it read, over those tickets'
// slots; granted at their slots, the two shared them and each was
// granted behind the other, the older jobs among them too. The tickets
// are numbered above the promise's last ticket (Term.LastTicket), and
// take their places among the held jobs by age: every one is granted
// before every held job first needed after it, and EC2 refuses nothing.
func TestTicketsBookedAfterTheLastPromiseAreGrantedAmongTheHeldJobsByAge(t *testing.T) {
	renewal, stop := t0.Add(time.Second), t0.Add(2*time.Second)
	var jobs []assignJob
	for i := range 150 { // before the renewal: the burst, then tickets
		jobs = append(jobs, assignJob{fmt.Sprintf("p%d", i), t0.Add(time.Duration(i) * time.Millisecond), time.Time{}})
	}
	unpromised := func(i int) time.Time { return renewal.Add(time.Duration(i+1) * 20 * time.Millisecond) }
	for i := range 40 {
		jobs = append(jobs, assignJob{fmt.Sprintf("u%d", i), unpromised(i), time.Time{}})
	}
	heldFirst := func(i int) time.Time { return stop.Add(time.Second + time.Duration(i)*300*time.Millisecond) }
	for i := range 40 {
		jobs = append(jobs, assignJob{fmt.Sprintf("h%d", i), heldFirst(i), time.Time{}})
	}
	granted := assignsThroughATakeover(t, renewal, stop, stop.Add(16*time.Second), jobs)
	for i := range 40 {
		u := fmt.Sprintf("u%d", i)
		for j := range 40 {
			if h := fmt.Sprintf("h%d", j); granted[h].Before(granted[u]) {
				t.Fatalf("%s, first needed %v into the takeover, was granted %v before %s, asked after the last renewal %v before the leader died",
					h, heldFirst(j).Sub(stop), granted[u].Sub(granted[h]), u, stop.Sub(unpromised(i)))
			}
		}
	}
}

// assignJob is an assign asked first at first, needed since needed (zero:
// since first).
type assignJob struct {
	name          string
	first, needed time.Time
}

// assignsThroughATakeover plays jobs, in their order, through a leader
// that writes its promise for the last time at renewal and dies at stop,
// and the standby that takes over at term (takeOver, with the controller's
// horizon), each job's holder asking as an agent's budget client does
// (clientJob). It fails t unless every job is granted and EC2 refuses
// none of the calls, and returns when each was granted, by name.
func assignsThroughATakeover(t *testing.T, renewal, stop, term time.Time, jobs []assignJob) map[string]time.Time {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Horizon = 3 * time.Second
	assign := []string{"AssignPrivateIpAddresses"}
	q := &evq{}
	leader := takeOver(q, cfg, renewal, stop, term)
	var calls []grantedCall
	granted := map[string]time.Time{}
	for _, j := range jobs {
		needed := j.needed
		if needed.IsZero() {
			needed = j.first
		}
		clientJob(q, leader, j.name, assign, j.first, sinceFirst(needed), func(l *Ledger, at time.Time) {
			granted[j.name] = at
			calls = append(calls, grantedCall{call{at, assign[0]}, l, j.name, 0})
		})
	}
	q.run()
	if len(granted) != len(jobs) {
		t.Fatalf("%d jobs granted; want %d", len(granted), len(jobs))
	}
	if at, a, ok := refused(calls); !ok {
		t.Fatalf("EC2 would refuse %s at %v", a, at.Sub(t0))
	}
	return granted
}

// The tickets whose slots pass during a takeover come back to the next
// leader as their holders retry, each on its own two-second phase from
// when it found no leader. Redeemed as they came, they were granted in
// that order, not their slots': a start-up read granted two seconds
// after its neighbours' put its node's assign behind a hundred others
// (a 300-node join whose leader died 3 s in: pods waited up to 52 s past
// the takeover). Gathered with the jobs held through the takeover, they
// are granted in their slots' order (within half a second), and EC2
// refuses nothing.
func TestTicketsHeldThroughATakeoverAreGrantedInTheirSlotsOrder(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Horizon = 3 * time.Second
	read := []string{"DescribeNetworkInterfaces"}
	stop := t0.Add(3 * time.Second)
	term := stop.Add(16 * time.Second)
	q := &evq{}
	leader := takeOver(q, cfg, stop, stop, term)
	const nodes = 300
	var calls []grantedCall
	granted := make([]time.Time, nodes)
	sinceHeld := func(now, held time.Time) time.Duration {
		if held.IsZero() {
			return 0
		}
		return now.Sub(held)
	}
	for i := range nodes {
		node := fmt.Sprintf("n%d", i)
		clientJob(q, leader, node, read, t0.Add(time.Duration(i)*time.Millisecond), sinceHeld, func(l *Ledger, at time.Time) {
			granted[i] = at
			calls = append(calls, grantedCall{call{at, read[0]}, l, node, 0})
		})
	}
	q.run()
	if at, a, ok := refused(calls); !ok {
		t.Fatalf("EC2 would refuse %s at %v", a, at.Sub(t0))
	}
	// The gathered tickets are handed slots a moment apart from the
	// gathering's end, which the tickets booked just after it may
	// precede by as much (ticketStep each): half a second, where a
	// holder's retry phase is two.
	var latest time.Time
	for i := range nodes {
		if early := latest.Sub(granted[i]); early > 500*time.Millisecond {
			t.Fatalf("n%d was granted %v into the term, %v before a job whose slot was before its own", i, granted[i].Sub(term), early)
		}
		latest = maxTime(latest, granted[i])
	}
}

// A job held through a takeover that no leader booked goes behind the
// previous leader's tickets due then, as that leader would have booked
// it, however long its pods have waited: they were booked when it had
// not asked yet. Handed the gathering's end with the tickets a moment
// apart after it, the held jobs of a 300-node join whose leader died 3
// s in were granted ahead of the held tickets, and the next job of each
// ticket's node (its ENI) came behind theirs: 13 nodes' pods waited
// past the takeover and an attach.
func TestJobsHeldThroughATakeoverAreGrantedBehindThePreviousLeadersTicketsDueThen(t *testing.T) {
	stop := t0.Add(2 * time.Second)
	term := stop.Add(16 * time.Second)
	var jobs []assignJob
	for i := range 120 { // the burst, then tickets due within the takeover
		jobs = append(jobs, assignJob{fmt.Sprintf("p%d", i), t0.Add(time.Duration(i) * time.Millisecond), time.Time{}})
	}
	needed := t0.Add(-10 * time.Second) // before any ticket was booked
	for i := range 40 {
		jobs = append(jobs, assignJob{fmt.Sprintf("h%d", i), stop.Add(time.Second + time.Duration(i)*100*time.Millisecond), needed})
	}
	granted := assignsThroughATakeover(t, stop, stop, term, jobs)
	for i := range 120 {
		p := fmt.Sprintf("p%d", i)
		for j := range 40 {
			if h := fmt.Sprintf("h%d", j); granted[h].Before(granted[p]) {
				t.Fatalf("%s, first asked in the takeover, was granted %v into the term, %v before %s, booked by the previous leader before it died",
					h, granted[h].Sub(term), granted[p].Sub(granted[h]), p)
			}
		}
	}
}
