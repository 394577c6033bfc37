package budgetapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/clock"
)

// Outcomes of Acquire, for metrics.
const (
	// Granted: the controller granted the calls (after a wait, maybe).
	Granted = "granted"
	// Alone: no controller answered; the agent calls EC2 on its own, as
	// it does with no controller installed.
	Alone = "alone"
)

// Client asks the controller before a job calls EC2. With no controller
// (not installed, no leader, unreachable, or answering errors) it steps
// aside for a while and the agent behaves as it does on its own: its
// per-process buckets and its backoff after a throttle. The cluster
// degrades to per-node behaviour, never to a node that cannot grow.
//
// A controller that was answering and stops is most likely failing over
// (its leader died; the standby takes the Lease over within about one
// lease duration): then the client holds its jobs, asking again every
// ElectionPause, for up to DefaultFailoverHold before it goes alone. A
// thousand nodes going alone at once in a join are a storm of
// RequestLimitExceeded that outlasts the failover by minutes (every
// node's growth backoff), where holding costs each job the takeover.
// It is safe for concurrent use.
type Client struct {
	node     string
	endpoint func(ctx context.Context) (string, error)
	token    func() (string, error)
	http     *http.Client
	clk      clock.Clock
	log      *slog.Logger
	timeout  time.Duration
	alone    time.Duration
	hold     time.Duration
	observe  func(outcome string, waited time.Duration)

	// mu guards the fields below; never held across a request.
	mu sync.Mutex
	// addr is the leader's "host:port" as last looked up; "" to look up.
	addr string
	// aloneUntil is when to try the controller again after a failure.
	aloneUntil time.Time
	// hadLeader says a controller answered since the client last gave
	// up holding jobs: a failure now is taken for a failover.
	hadLeader bool
	// holdUntil, while a failover is under way, is when the client stops
	// holding jobs and goes alone.
	holdUntil time.Time
	// throttled are actions EC2 refused since the last request.
	throttled []string
	// lastErr is why the controller last failed to answer.
	lastErr error
	// lastAsk numbers Acquire's jobs (budget.Request.Ask); it starts
	// from the clock, so an agent that restarts does not reuse its
	// last run's numbers while a leader still knows them.
	lastAsk uint64
	// granted and wentAlone count Acquire's outcomes, answered the
	// controller's answers.
	granted, wentAlone, answered uint64

	// holds is signalled when a hold for the next leader starts or ends
	// (HoldChanges); one pending signal is enough, Status says which.
	holds chan struct{}
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// Node names this node in requests.
	Node string
	// Endpoint finds the controller's leader: "host:port".
	Endpoint func(ctx context.Context) (string, error)
	// Token is the bearer token sent (the agent's service account
	// token, re-read as the kubelet rotates it). Nil sends none.
	Token func() (string, error)
	// HTTP carries requests. Nil: a client of its own.
	HTTP *http.Client
	// Clock is what waits run on. Nil: the wall clock.
	Clock clock.Clock
	Log   *slog.Logger
	// Timeout bounds one ask (default 2 s): a slow controller must not
	// hold up pods longer than going alone would.
	Timeout time.Duration
	// Alone is how long the agent goes alone after the controller failed
	// to answer (default DefaultAlone).
	Alone time.Duration
	// FailoverHold is how long the client holds jobs after a controller
	// that was answering stopped (default DefaultFailoverHold; negative:
	// none, the job goes alone at once, as a driver that cannot wait
	// needs: agent/simulation plays a schedule on one thread).
	FailoverHold time.Duration
	// Observe sees each Acquire's outcome and how long it waited.
	Observe func(outcome string, waited time.Duration)
}

// NewClient returns a Client.
func NewClient(o ClientOptions) *Client {
	c := &Client{node: o.Node, endpoint: o.Endpoint, token: o.Token, http: o.HTTP, clk: o.Clock, log: o.Log,
		timeout: o.Timeout, alone: o.Alone, hold: o.FailoverHold, observe: o.Observe, holds: make(chan struct{}, 1)}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.clk == nil {
		c.clk = clock.Real{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.timeout <= 0 {
		c.timeout = 2 * time.Second
	}
	if c.alone <= 0 {
		c.alone = DefaultAlone
	}
	if c.hold == 0 {
		c.hold = DefaultFailoverHold
	}
	c.lastAsk = uint64(max(c.clk.Now().UnixNano(), 0))
	return c
}

// ClientStatus is what an agent's client has seen of the controller.
type ClientStatus struct {
	// Granted and Alone count Acquire's outcomes; Answered counts every
	// answer the controller gave (pressure polls included).
	Granted, Alone, Answered uint64
	// AloneUntil is set while the agent calls EC2 on its own budget
	// after the controller failed to answer; AloneBecause says why.
	AloneUntil   time.Time
	AloneBecause string
	// Holding says the client holds EC2 calls for the controller's next
	// leader: it fails over.
	Holding bool
}

// Status says what the client has seen of the controller.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ClientStatus{Granted: c.granted, Alone: c.wentAlone, Answered: c.answered, Holding: !c.holdUntil.IsZero()}
	if c.clk.Now().Before(c.aloneUntil) && c.lastErr != nil {
		st.AloneUntil, st.AloneBecause = c.aloneUntil, c.lastErr.Error()
	}
	return st
}

// HoldChanges is signalled when the client starts or stops holding EC2
// calls for the controller's next leader (Status().Holding says which):
// the agent lets waiting pods' ADDs wait out the failover rather than
// fail just before their addresses come.
func (c *Client) HoldChanges() <-chan struct{} { return c.holds }

// holdChanged signals HoldChanges, without blocking: a signal not taken
// yet already says to look. c.mu is held.
func (c *Client) holdChanged() {
	select {
	case c.holds <- struct{}{}:
	default:
	}
}

// Throttled records that EC2 answered action with RequestLimitExceeded;
// the next request tells the controller.
func (c *Client) Throttled(action string) {
	c.mu.Lock()
	c.noteThrottled(action)
	c.mu.Unlock()
}

// noteThrottled adds action to the refusals to report, once, at most
// MaxNames of them (a request with more is refused). c.mu is held.
func (c *Client) noteThrottled(actions ...string) {
	for _, a := range actions {
		if !slices.Contains(c.throttled, a) && len(c.throttled) < MaxNames {
			c.throttled = append(c.throttled, a)
		}
	}
}

// Need is what a job's calls are wanted for, as it stands at one ask.
type Need struct {
	// Urgent says pods wait for the calls (else they fill the warm pool).
	Urgent bool
	// Since, for an urgent job, is when the node's longest-waiting pod
	// began waiting (zero: unknown). A leader that gathers the requests
	// held through its takeover books them by it: a job asked after the
	// takeover because a job held through it came back late (the ENI
	// after the assign) keeps its pods' place.
	Since time.Time
}

// Acquire returns once the calls of actions may be made: granted by the
// controller (after the wait it set), or at once when there is no
// controller to ask. need is asked before every request, so a job queued
// as warm-pool work moves ahead as soon as a pod waits for it. It fails
// only when ctx ends.
func (c *Client) Acquire(ctx context.Context, actions []string, need func() Need) error {
	if len(actions) == 0 {
		return nil
	}
	start := c.clk.Now()
	// ticket holds a slot booked beyond the controller's horizon, at
	// slot on this node's clock; it is sent back with the slot, so a
	// next leader grants it in its place too. A controller that sends
	// no slot (before SlotMs) gets the ticket alone: slot stays zero.
	// heldSince is when a failover first held the job (Age).
	var (
		ticket    uint64
		slot      time.Time
		heldSince time.Time
	)
	c.mu.Lock()
	c.lastAsk++
	ask := c.lastAsk
	c.mu.Unlock()
	for {
		nd := need()
		r := budget.Request{Node: c.node, Actions: actions, Urgent: nd.Urgent, Ticket: ticket, Ask: ask}
		if ticket != 0 && !slot.IsZero() {
			r.SlotMs = budget.SlotMs(slot, c.clk.Now())
		}
		r.AgeMs = Age(c.clk.Now(), heldSince, nd)
		g, ok, retry := c.ask(ctx, r)
		if !ok && retry == 0 {
			c.done(Alone, start)
			return ctx.Err()
		}
		if ok {
			ticket, slot = g.Ticket, time.Time{}
			if g.Slot != 0 {
				slot = c.clk.Now().Add(g.Slot)
			}
		}
		d := g.Wait
		switch {
		case !ok:
			d = retry // a failover: ask the next leader
			if heldSince.IsZero() {
				heldSince = c.clk.Now()
			}
		case !g.Granted():
			d = g.Deferred
		}
		if d > 0 {
			ch, stop := clock.After(c.clk, d)
			select {
			case <-ch:
			case <-ctx.Done():
				stop()
				return ctx.Err()
			}
		}
		if ok && g.Granted() {
			c.done(Granted, start)
			return nil
		}
	}
}

// Pressure reports the subnets the node found out of addresses and asks
// which of its subnets are nearly full. Without a controller to ask it
// says none: the node keeps its warm pool, as it does on its own.
func (c *Client) Pressure(ctx context.Context, subnets, exhausted []string) []string {
	g, ok, _ := c.ask(ctx, budget.Request{Node: c.node, Subnets: subnets, Exhausted: exhausted})
	if !ok {
		return nil
	}
	return g.Pressure
}

func (c *Client) done(outcome string, start time.Time) {
	c.mu.Lock()
	if outcome == Granted {
		c.granted++
	} else {
		c.wentAlone++
	}
	c.mu.Unlock()
	if c.observe != nil {
		c.observe(outcome, c.clk.Now().Sub(start))
	}
}

// Age is budget.Request.AgeMs at now for a job a failover held since
// heldSince (zero: not held) with need: how long it has been needed, by
// the longer of its hold and its pods' wait, within budget.MaxSlot.
func Age(now, heldSince time.Time, need Need) int64 {
	var age time.Duration
	if !heldSince.IsZero() {
		age = now.Sub(heldSince)
	}
	if need.Urgent && !need.Since.IsZero() {
		age = max(age, now.Sub(need.Since))
	}
	return min(max(age, 0), budget.MaxSlot).Milliseconds()
}

// errNotLeader: the replica asked does not lead; an election is under way
// or just ended.
var errNotLeader = errors.New("an election is under way")

// errRefused: the controller answered and refused the request (4xx: the
// token, the request): no failover, and no next leader would answer it
// otherwise, so the job goes alone at once.
var errRefused = errors.New("refused by the controller")

// DefaultFailoverHold is how long the client holds jobs after a
// controller that was answering stopped, waiting for the next leader,
// before it goes alone: a crashed leader's Lease is taken over about
// one lease duration (15 s) after its last renewal, by a candidate that
// retries every 2 to 4.4 s (retry period 2 s, client-go's jitter 1.2)
// and needs one retry to see the last renewal: at most 15 + 2 × 4.4 s,
// plus an ElectionPause before the client looks again.
const DefaultFailoverHold = 30 * time.Second

// TermGather is how long a new leader gathers urgent requests before it
// books them in the order they were first asked (budget.Term.Gather): a
// client holding its jobs asks again every ElectionPause, so by then
// every job held through the takeover has been heard of.
const TermGather = ElectionPause + ElectionPause/4

// DefaultAlone is how long the agent goes alone after the controller
// failed to answer, unless ClientOptions.Alone says otherwise.
const DefaultAlone = 30 * time.Second

// ElectionPause is how long the agent steps aside after asking a replica
// that does not lead: about one retry period of the election, after which
// the Lease names the leader that knows it leads.
const ElectionPause = 2 * time.Second

// ask makes one request. Without an answer (ok false) retry, when not
// zero, says a failover is under way and the job should ask again after
// it; zero sends the job alone.
func (c *Client) ask(parent context.Context, r budget.Request) (g budget.Grant, ok bool, retry time.Duration) {
	c.mu.Lock()
	if c.clk.Now().Before(c.aloneUntil) {
		c.mu.Unlock()
		return budget.Grant{}, false, 0
	}
	addr := c.addr
	r.Throttled, c.throttled = c.throttled, nil
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	g, err := c.post(ctx, addr, r)
	if err == nil {
		c.mu.Lock()
		c.answered++
		if !c.holdUntil.IsZero() {
			c.log.Info("budget controller answering again", "held", c.clk.Now().Sub(c.holdUntil.Add(-c.hold)))
			c.holdChanged()
		}
		c.hadLeader, c.holdUntil = true, time.Time{}
		c.mu.Unlock()
		return g, true, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteThrottled(r.Throttled...) // still to report
	if parent.Err() != nil {
		return budget.Grant{}, false, 0 // the job is cancelled, not the controller gone
	}
	c.addr = "" // look the leader up again next time
	c.lastErr = err
	now := c.clk.Now()
	if c.hadLeader && c.hold > 0 && !errors.Is(err, errRefused) {
		if c.holdUntil.IsZero() {
			c.holdUntil = now.Add(c.hold)
			c.holdChanged()
			c.log.Warn("budget controller stopped answering; holding EC2 calls for its next leader",
				"max", c.hold, "err", err)
		}
		if now.Before(c.holdUntil) {
			return budget.Grant{}, false, min(ElectionPause, c.holdUntil.Sub(now))
		}
		c.hadLeader, c.holdUntil = false, time.Time{}
		c.holdChanged()
	}
	alone := c.alone
	if errors.Is(err, errNotLeader) {
		alone = min(alone, ElectionPause)
	}
	c.aloneUntil = now.Add(alone)
	c.log.Warn("budget controller did not answer; calling EC2 on this node's own budget for a while",
		"for", alone, "err", err)
	return budget.Grant{}, false, 0
}

func (c *Client) post(ctx context.Context, addr string, r budget.Request) (budget.Grant, error) {
	if addr == "" {
		a, err := c.endpoint(ctx)
		if err != nil {
			return budget.Grant{}, fmt.Errorf("find the budget controller: %w", err)
		}
		addr = a
		c.mu.Lock()
		c.addr = a
		c.mu.Unlock()
	}
	body, err := json.Marshal(r)
	if err != nil {
		return budget.Grant{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+ReservePath, bytes.NewReader(body))
	if err != nil {
		return budget.Grant{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != nil {
		tok, err := c.token()
		if err != nil {
			return budget.Grant{}, fmt.Errorf("read service account token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return budget.Grant{}, fmt.Errorf("ask %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("ask %s: %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(NotLeaderHeader) != "" {
			err = fmt.Errorf("%w (%w)", err, errNotLeader)
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			err = fmt.Errorf("%w (%w)", err, errRefused)
		}
		return budget.Grant{}, err
	}
	var a Answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxRequestBytes)).Decode(&a); err != nil {
		return budget.Grant{}, fmt.Errorf("ask %s: decode answer: %w", addr, err)
	}
	if a.WaitMs < 0 || a.DeferredMs < 0 {
		return budget.Grant{}, fmt.Errorf("ask %s: negative wait in answer %+v", addr, a)
	}
	return a.Grant(), nil
}
