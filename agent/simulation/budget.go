package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
)

// controllerState is what the cluster's budget controller does now.
type controllerState int

const (
	// ctrlAnswering: the leader grants every request at once.
	ctrlAnswering controllerState = iota
	// ctrlUnreachable: the leader's address does not answer.
	ctrlUnreachable
	// ctrlElecting: a failover; the Lease names a replica that does not
	// know it leads yet and answers 503 not-leader.
	ctrlElecting
	// ctrlNoLeader: no replica holds the Lease.
	ctrlNoLeader
)

func (s controllerState) String() string {
	return [...]string{"answering", "unreachable", "electing", "no leader"}[s]
}

// controller is the cluster's budget controller as the agent's budget
// client (budgetapi.Client, vpcnetd's own) reaches it: an HTTP handler in
// process. It grants at once, never with a wait: the client waits on the
// clock's timers, which a schedule on one thread cannot fire while it
// waits.
type controller struct {
	state controllerState
	// grants counts the requests granted.
	grants int
}

func (c *controller) endpoint(context.Context) (string, error) {
	if c.state == ctrlNoLeader {
		return "", errors.New("simulated: the budget controller's Lease has no holder")
	}
	return "budget.sim:8443", nil
}

func (c *controller) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	switch c.state {
	case ctrlUnreachable:
		return nil, errors.New("simulated: connect to budget.sim:8443: connection refused")
	case ctrlElecting:
		rec.Header().Set(budgetapi.NotLeaderHeader, "1")
		http.Error(rec, "not the leader yet", http.StatusServiceUnavailable)
	default:
		var r budget.Request
		if err := json.NewDecoder(req.Body).Decode(&r); err != nil || budgetapi.Validate(r) != nil {
			http.Error(rec, fmt.Sprintf("bad request: %v %v", err, budgetapi.Validate(r)), http.StatusBadRequest)
			break
		}
		c.grants++
		_ = json.NewEncoder(rec).Encode(budgetapi.Answer{})
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// budgetProbe is the agent's budget: vpcnetd's client, watched so the
// schedule knows which calls the piece of work running now was granted.
type budgetProbe struct {
	r *run
	c *budgetapi.Client
}

var _ agent.Budget = (*budgetProbe)(nil)

func (b *budgetProbe) Acquire(ctx context.Context, actions []string, need func() budgetapi.Need) error {
	before := b.c.Status().Granted
	err := b.c.Acquire(ctx, actions, need)
	if b.c.Status().Granted > before {
		b.r.grant = append(b.r.grant, actions...)
	}
	return err
}

func (b *budgetProbe) Pressure(ctx context.Context, subnets, exhausted []string) []string {
	return b.c.Pressure(ctx, subnets, exhausted)
}

func (b *budgetProbe) Status() budgetapi.ClientStatus { return b.c.Status() }

func (b *budgetProbe) HoldChanges() <-chan struct{} { return b.c.HoldChanges() }

// newBudget is the agent's budget client for a run with a controller.
func (r *run) newBudget() *budgetProbe {
	// No failover hold: the client would wait on the clock for the next
	// leader, and the schedule, on one thread, cannot advance it while
	// it waits (every seed with a failover hung). The hold is tested by
	// budgetapi's failover tests and scale's failover scenario.
	c := budgetapi.NewClient(budgetapi.ClientOptions{Node: instanceID, Endpoint: r.ctrl.endpoint,
		HTTP: &http.Client{Transport: r.ctrl}, Clock: r.clk, FailoverHold: -1})
	return &budgetProbe{r: r, c: c}
}

// ec2Call is I11, told of every EC2 request the agent makes: while the
// controller answers and the client asks it (not gone alone after a
// failure), no EC2 call is made that the piece of work making it was not
// granted.
func (r *run) ec2Call(action string) {
	if r.ctrl == nil || r.budget == nil || r.unwatched || r.grantErr != nil || r.ctrl.state != ctrlAnswering {
		return
	}
	if !r.budget.c.Status().AloneUntil.IsZero() {
		return
	}
	if !slices.Contains(r.grant, action) {
		r.grantErr = r.fail("I11: %s called while the budget controller answers, outside a grant (this work was granted %v)", action, r.grant)
	}
}

// controllerMoves changes what the budget controller does: it fails over,
// becomes unreachable, loses its leader, or answers again.
func (st *steps) controllerMoves() {
	r := st.r
	if r.ctrl.state != ctrlAnswering && r.rng.IntN(2) == 0 {
		r.ctrl.state = ctrlAnswering
	} else {
		r.ctrl.state = controllerState(r.rng.IntN(4))
	}
	r.trace("budget controller: %s", r.ctrl.state)
}
