package scale

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
)

// controllerRTT is an agent's round trip to the budget controller: a
// small HTTP request inside the cluster.
const controllerRTT = 5 * time.Millisecond

// controller is the budget controller (cmd/vpcnet-budget) as the driver
// runs it: the real budget.Ledger, sized from the account's buckets, asked
// before every job that calls EC2 the way the agent's budgetapi.Client
// asks it (urgency read again at every ask, refusals reported, deferred
// work asking again when told), with a round trip of controllerRTT. Only
// the HTTP transport is left out.
type controller struct {
	l *budget.Ledger
	// el, in the failover scenario, is the controller's two replicas
	// and their Lease, which the agents' clients find the leader by;
	// nil: l, one replica that always leads.
	el *election
	// noHold models the agents' client before it held jobs through a
	// failover: every failure sends the node alone.
	noHold bool
}

func newController(cfg budget.Config) *controller {
	return &controller{l: budget.New(cfg)}
}

// budgetConfig is the controller's Ledger for the account's buckets.
func (acc Account) budgetConfig() budget.Config {
	cfg := budget.DefaultConfig()
	cfg.Default = budget.Bucket{Burst: acc.Mutating.Burst, Refill: acc.Mutating.Refill}
	for a := range cfg.Buckets {
		b := acc.bucketFor(a)
		cfg.Buckets[a] = budget.Bucket{Burst: b.Burst, Refill: b.Refill}
	}
	// The controller's horizon with its default Lease timings
	// (controller.Settings.Horizon).
	cfg.Horizon = grantHorizon
	return cfg
}

// acquire asks for actions on behalf of node n's run gen and calls fn once
// they are granted; a run that ended meanwhile asks no more. need is
// asked again at every ask.
func (c *controller) acquire(n *node, gen int, actions []string, need func() budgetapi.Need, fn func()) {
	n.bc.lastAsk++
	c.acquireAgain(n, gen, actions, need, fn, asking{ask: n.bc.lastAsk})
}

// asking is what budgetapi.Client's Acquire keeps between one ask of a
// job and the next: the job's number, since when a failover held it, and
// the ticket of a slot the controller booked beyond its horizon with when
// that slot falls.
type asking struct {
	ask       uint64
	heldSince time.Time
	ticket    uint64
	slot      time.Time
}

// request is the ask for actions as budgetapi.Client sends it: a
// ticket's slot and the time held as durations from now.
func (a asking) request(n *node, actions []string, need budgetapi.Need) budget.Request {
	now := n.r.now()
	req := budget.Request{Node: n.id, Actions: actions, Urgent: need.Urgent, Ticket: a.ticket, Ask: a.ask}
	if a.ticket != 0 {
		req.SlotMs = budget.SlotMs(a.slot, now)
	}
	req.AgeMs = budgetapi.Age(now, a.heldSince, need)
	return req
}

// acquireAgain is acquire's next ask of the same job.
func (c *controller) acquireAgain(n *node, gen int, actions []string, need func() budgetapi.Need, fn func(), a asking) {
	r := n.r
	ask := func() {
		if n.gen != gen {
			return
		}
		g, out, retry := c.ask(n, a.request(n, actions, need()))
		if out == hold {
			n.bc.held++
			if a.heldSince.IsZero() {
				a.heldSince = r.now()
			}
			r.q.at(r.now().Add(controllerRTT/2+retry), func() {
				if n.gen == gen {
					c.acquireAgain(n, gen, actions, need, fn, a)
				}
			})
			return
		}
		if out == goAlone {
			// No controller answered: the job calls EC2 at once, on
			// the node's own buckets (budgetapi.Client's Alone).
			n.bc.alone++
			r.q.at(r.now().Add(controllerRTT/2+n.bc.aloneDelay(r.now(), actions)), func() {
				if n.gen == gen {
					fn()
				}
			})
			return
		}
		d := g.Wait
		if !g.Granted() {
			d = g.Deferred
		}
		r.q.at(r.now().Add(controllerRTT/2+d), func() {
			if n.gen != gen {
				return
			}
			if g.Granted() {
				fn()
				return
			}
			a.ticket, a.slot = g.Ticket, r.now().Add(g.Slot-d)
			c.acquireAgain(n, gen, actions, need, fn, a)
		})
	}
	r.q.at(r.now().Add(controllerRTT/2), ask)
}

// watchPressure is the agent's pressure loop (agent/budget.go): every
// reconcile interval the node reports the subnets EC2 found out of
// addresses and learns which of its subnets are nearly full; a change
// goes to the machine.
func (c *controller) watchPressure(n *node, gen int, last []string) {
	r := n.r
	r.q.at(r.now().Add(r.cfg.ReconcileInterval), func() {
		if n.gen != gen || n.agent == nil {
			return
		}
		v := n.agent.ag.Node().Summary(r.now())
		// Without a controller to ask, no subnet is under pressure
		// (budgetapi.Client.Pressure).
		g, _, _ := c.ask(n, budget.Request{Node: n.id, Subnets: v.Subnets, Exhausted: v.Exhausted})
		p := g.Pressure
		if !slices.Equal(p, last) {
			n.step(nodestate.SubnetPressure{Subnets: p})
		}
		c.watchPressure(n, gen, p)
	})
}
