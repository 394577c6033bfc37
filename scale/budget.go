package scale

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget"
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
// they are granted; a run that ended meanwhile asks no more. urgent is
// asked again at every ask.
func (c *controller) acquire(n *node, gen int, actions []string, urgent func() bool, fn func()) {
	c.acquireTicket(n, gen, actions, urgent, fn, heldTicket{})
}

// heldTicket is a slot the controller booked beyond its horizon: its
// number, and when it falls (budgetapi.Client keeps both).
type heldTicket struct {
	id   uint64
	slot time.Time
}

// request is the ask for actions, with the ticket held if any, as
// budgetapi.Client sends it: the slot as time from now.
func (t heldTicket) request(n *node, actions []string, urgent bool) budget.Request {
	req := budget.Request{Node: n.id, Actions: actions, Urgent: urgent, Ticket: t.id}
	if t.id != 0 {
		req.SlotMs = budget.SlotMs(t.slot, n.r.now())
	}
	return req
}

// acquireTicket is acquire, coming back with the ticket of a slot the
// controller booked beyond its horizon.
func (c *controller) acquireTicket(n *node, gen int, actions []string, urgent func() bool, fn func(), ticket heldTicket) {
	r := n.r
	ask := func() {
		if n.gen != gen {
			return
		}
		g, out, retry := c.ask(n, ticket.request(n, actions, urgent()))
		if out == hold {
			n.bc.held++
			r.q.at(r.now().Add(controllerRTT/2+retry), func() {
				if n.gen == gen {
					c.acquireTicket(n, gen, actions, urgent, fn, ticket)
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
			c.acquireTicket(n, gen, actions, urgent, fn, heldTicket{g.Ticket, r.now().Add(g.Slot - d)})
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
