package scale

import (
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/cloud"
)

// The budget controller's election, as budget/controller runs it with
// client-go's leaderelection on a Lease, and the agents' budget client
// (budgetapi.Client) around it, in simulated time.

// The controller's election timings: budget/controller's defaults
// (VPCNET_BUDGET_LEASE_DURATION, _RENEW_DEADLINE, _RETRY_PERIOD; a test
// checks they agree) and client-go's jitter of a candidate's retries
// (leaderelection.JitterFactor).
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	retryJitter   = 1.2
	// grantHorizon, and termCredit: how long before its term a new
	// leader takes the buckets as empty (controller.Settings.Horizon:
	// the last leader granted only while its last renewal was at most
	// two retry periods old, and its jobs' calls take up to a second).
	grantHorizon = leaseDuration - renewDeadline - retryPeriod
	termCredit   = leaseDuration - 2*retryPeriod - grantHorizon - time.Second
)

// replica is one of the controller's two replicas.
type replica struct {
	up bool
	// leading: it heard it won the Lease and answers agents.
	leading bool
	ledger  *budget.Ledger
	// observed is the Lease's renewTime when this replica last saw it
	// change, observedAt when (its own clock): client-go takes the Lease
	// over only once it has seen no renewal for leaseDuration.
	observed, observedAt time.Time
	// read is the promise the Lease carried when this replica last read
	// it (controller.BookedAnnotation and LastTicketAnnotation).
	read budget.Promise
}

// election is the Lease and the replicas contending for it. Replica 0
// leads from the start of the measured phase, as a controller that has
// led for long (its buckets full); replica 1 stands by.
type election struct {
	r *run
	// rng draws the candidates' jitter: the run's own would change
	// every later kubelet backoff, and the comparison with the join
	// without a failover would measure that.
	rng      *rand.Rand
	replicas [2]*replica
	// holder is the replica the Lease names; renewed its renewTime,
	// promise its annotations of the schedule booked and the last ticket.
	holder  int
	renewed time.Time
	promise budget.Promise
	// killedAt is when the leader died, tookOver when its successor
	// first answered.
	killedAt, tookOver time.Time
	// refused counts the asks that found the leader gone or not leading
	// yet.
	refused int
	// credit is how long before its term a new leader takes the
	// buckets as empty: termCredit, or none for a controller whose
	// grants had no horizon (Options.NoHorizon), as it was.
	credit time.Duration
	// gather is how long a new leader gathers urgent requests before it
	// books them oldest first (budgetapi.TermGather; Options.NoGather:
	// none, as it was).
	gather time.Duration
}

func newElection(r *run, cfg budget.Config) *election {
	e := &election{r: r, rng: rand.New(rand.NewPCG(r.opts.Seed, 0x656c656374)), holder: 0, renewed: r.now()}
	if cfg.Horizon > 0 {
		e.credit = termCredit
	}
	if !r.opts.NoGather {
		e.gather = budgetapi.TermGather
	}
	for i := range e.replicas {
		e.replicas[i] = &replica{up: true, ledger: budget.New(cfg), observed: r.now(), observedAt: r.now()}
	}
	e.replicas[0].leading = true
	for i := range e.replicas {
		e.loop(i)
	}
	return e
}

// loop is replica i's leaderelection: the holder renews every retry
// period; a candidate looks at the Lease every retry period plus up to
// retryJitter of it more, and takes it over once it saw no renewal for
// leaseDuration.
func (e *election) loop(i int) {
	rp := e.replicas[i]
	if !rp.up {
		return
	}
	now := e.r.now()
	wait := retryPeriod
	if e.holder == i {
		e.renewed = now
		e.promise = budget.Renewal(rp.read, rp.ledger.Promise(now))
	} else {
		wait += time.Duration(e.rng.Float64() * retryJitter * float64(retryPeriod))
		rp.read = e.promise
		if !e.renewed.Equal(rp.observed) {
			rp.observed, rp.observedAt = e.renewed, now
		}
		if now.After(rp.observedAt.Add(leaseDuration)) {
			// Takes the Lease; client-go calls OnStartedLeading once
			// the update is written (a round trip later), which starts
			// the Ledger's term (controller.Run), counting the refill
			// since the last leader's grants surely ended.
			e.holder, e.renewed = i, now
			e.r.q.at(now.Add(controllerRTT), func() {
				if !rp.up || e.holder != i {
					return
				}
				rp.ledger.StartTerm(budget.Term{Now: e.r.now(), EmptyAt: e.termStart(rp), Stopped: rp.observedAt, Booked: rp.read.Booked, LastTicket: rp.read.LastTicket, Gather: e.gather})
				rp.leading = true
				if e.tookOver.IsZero() {
					e.tookOver = e.r.now()
				}
			})
			wait = retryPeriod
		}
	}
	e.r.q.at(now.Add(wait), func() { e.loop(i) })
}

// termStart is when a new leader takes the buckets as empty, as the
// controller does (controller.termOffset): when the grants the last
// leader could still make after the last renewal rp saw have ended (rp
// saw it at observedAt, after it was made); with no horizon, the term's
// start. A takeover comes a lease duration or more after observedAt, so
// this is termCredit or more before the term.
func (e *election) termStart(rp *replica) time.Time {
	if e.credit == 0 {
		return e.r.now()
	}
	return rp.observedAt.Add(leaseDuration - termCredit)
}

// kill ends the leader's process (a crash: the Lease is not released).
// Its node stays up, so agents asking it are refused at once.
func (e *election) kill() {
	rp := e.replicas[e.holder]
	rp.up, rp.leading = false, false
	e.killedAt = e.r.now()
}

// clientState is a node's budgetapi.Client: the leader it last found,
// until when it goes alone after the controller failed to answer, and
// the hold of its jobs while the controller fails over.
type clientState struct {
	// addr is the replica the client asks; -1 looks the Lease up first.
	addr       int
	aloneUntil time.Time
	// answered says a controller answered since the client last gave
	// up holding: a failure now is a failover, worth waiting out.
	answered bool
	// holdUntil, while the controller fails over, is when the client
	// stops holding jobs and goes alone.
	holdUntil time.Time
	// alone counts the jobs that ran on the node's own budget, held the
	// asks that waited for a leader.
	alone, held int
	// lastAsk numbers the node's jobs (budget.Request.Ask).
	lastAsk uint64
	// buckets are the node's own EC2 client's token buckets
	// (cloud.DefaultBuckets), which pace its calls while it goes alone.
	buckets map[string]*rate.Limiter
}

// askOutcome is what one ask of budgetapi.Client came to.
type askOutcome int

const (
	answered askOutcome = iota
	// goAlone: the job calls EC2 on the node's own budget now.
	goAlone
	// hold: a failover is under way; ask again after the returned wait.
	hold
)

// ask is budgetapi.Client.ask: see there for what each failure means.
// Refusals EC2 gave are taken from the transport only by an ask that
// reaches a leader (a failed one reports them next time).
func (c *controller) ask(n *node, req budget.Request) (budget.Grant, askOutcome, time.Duration) {
	now := n.r.now()
	if c.el == nil {
		req.Throttled = n.tr.takeThrottled()
		return c.l.Reserve(now, req), answered, 0
	}
	cs := &n.bc
	if now.Before(cs.aloneUntil) {
		return budget.Grant{}, goAlone, 0
	}
	e := c.el
	fail := func(aside time.Duration) (budget.Grant, askOutcome, time.Duration) {
		e.refused++
		cs.addr = -1
		if c.noHold || !cs.answered {
			cs.aloneUntil = now.Add(aside)
			return budget.Grant{}, goAlone, 0
		}
		if cs.holdUntil.IsZero() {
			cs.holdUntil = now.Add(budgetapi.DefaultFailoverHold)
			n.holding(true)
		}
		if now.Before(cs.holdUntil) {
			return budget.Grant{}, hold, min(budgetapi.ElectionPause, cs.holdUntil.Sub(now))
		}
		cs.answered, cs.holdUntil = false, time.Time{}
		n.holding(false)
		cs.aloneUntil = now.Add(aside)
		return budget.Grant{}, goAlone, 0
	}
	if cs.addr < 0 {
		// kube.BudgetEndpoint: a Lease last renewed longer than its
		// duration ago names no leader.
		if now.After(e.renewed.Add(leaseDuration)) {
			return fail(budgetapi.DefaultAlone)
		}
		cs.addr = e.holder
	}
	rp := e.replicas[cs.addr]
	switch {
	case !rp.up:
		return fail(budgetapi.DefaultAlone)
	case !rp.leading:
		return fail(min(budgetapi.DefaultAlone, budgetapi.ElectionPause))
	}
	if !cs.holdUntil.IsZero() {
		n.holding(false)
	}
	cs.answered, cs.holdUntil = true, time.Time{}
	req.Throttled = n.tr.takeThrottled()
	return rp.ledger.Reserve(now, req), answered, 0
}

// holding tells the node's agent that its budget client started or
// stopped holding EC2 calls for the next leader, as vpcnetd's watchHolds
// does from the client's HoldChanges: a moment later, on the agent's
// loop.
func (n *node) holding(h bool) {
	gen := n.gen
	n.r.q.at(n.r.now(), func() {
		if n.gen == gen && n.agent != nil {
			n.step(nodestate.BudgetFailover{Holding: h})
		}
	})
}

// aloneDelay is how long the node's own EC2 client makes the calls of a
// job wait for its per-process buckets (cloud.DefaultBuckets, one
// rate.Limiter per action as cloud's), as vpcnetd does when no
// controller answers: each call takes its token at once.
func (cs *clientState) aloneDelay(now time.Time, actions []string) time.Duration {
	if cs.buckets == nil {
		cs.buckets = map[string]*rate.Limiter{}
	}
	var d time.Duration
	for _, a := range actions {
		l, ok := cs.buckets[a]
		if !ok {
			b, known := cloud.DefaultBuckets()[a]
			if !known {
				// cloud's fallbacks for an action not in its table.
				b = cloud.Bucket{Burst: 50, Refill: 5}
				if strings.HasPrefix(a, "Describe") {
					b = cloud.Bucket{Burst: 100, Refill: 20}
				}
			}
			l = rate.NewLimiter(rate.Limit(b.Refill), b.Burst)
			cs.buckets[a] = l
		}
		d = max(d, l.ReserveN(now, 1).DelayFrom(now))
	}
	return d
}

// failoverAt is when in the measured phase the leader dies, unless
// Options.FailoverAt says: half the join's lower bound, with most
// grants still to come.
func failoverAt(o Options, lowerBound time.Duration) time.Duration {
	if o.FailoverAt > 0 {
		return o.FailoverAt
	}
	return lowerBound / 2
}
