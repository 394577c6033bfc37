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
}

func newController(acc Account) *controller {
	cfg := budget.DefaultConfig()
	cfg.Default = budget.Bucket{Burst: acc.Mutating.Burst, Refill: acc.Mutating.Refill}
	for a := range cfg.Buckets {
		b := acc.bucketFor(a)
		cfg.Buckets[a] = budget.Bucket{Burst: b.Burst, Refill: b.Refill}
	}
	return &controller{l: budget.New(cfg)}
}

// acquire asks for actions on behalf of node n's run gen and calls fn once
// they are granted; a run that ended meanwhile asks no more. urgent is
// asked again at every ask.
func (c *controller) acquire(n *node, gen int, actions []string, urgent func() bool, fn func()) {
	r := n.r
	ask := func() {
		if n.gen != gen {
			return
		}
		g := c.l.Reserve(r.now(), budget.Request{Node: n.id, Actions: actions, Urgent: urgent(), Throttled: n.tr.takeThrottled()})
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
			c.acquire(n, gen, actions, urgent, fn)
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
		p := c.l.Reserve(r.now(), budget.Request{Node: n.id, Subnets: v.Subnets, Exhausted: v.Exhausted}).Pressure
		if !slices.Equal(p, last) {
			n.step(nodestate.SubnetPressure{Subnets: p})
		}
		c.watchPressure(n, gen, p)
	})
}
