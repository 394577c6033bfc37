package nodestate

import (
	"maps"
	"slices"
	"time"
)

// SubnetPressure is the budget controller's word on which of the node's
// subnets are nearly out of addresses (issue 15: on a full subnet, pods
// on nodes that cannot grow wait for good while other nodes hold idle
// addresses). While a subnet the pool uses is under pressure, the pool
// grows only for pods that wait and gives back what it holds beyond
// them, detaching free ENIs without the detach hold, so that the
// subnet's addresses go where pods are.
type SubnetPressure struct {
	Subnets []string
}

// exhaustedFor is how long a subnet EC2 found out of addresses is
// reported to the controller.
const exhaustedFor = 10 * time.Minute

type pressure struct {
	// under are the subnets under pressure, as last heard.
	under []string
	// exhausted are the subnets EC2 refused to grow the pool in for want
	// of addresses, and when it last did.
	exhausted map[string]time.Time
}

func (p *pressure) set(ev SubnetPressure) {
	p.under = slices.Clone(ev.Subnets)
	slices.Sort(p.under)
}

func (p *pressure) noteExhausted(subnet string, now time.Time) {
	if subnet == "" {
		return
	}
	if p.exhausted == nil {
		p.exhausted = map[string]time.Time{}
	}
	maps.DeleteFunc(p.exhausted, func(_ string, at time.Time) bool { return now.Sub(at) >= exhaustedFor })
	p.exhausted[subnet] = now
}

// recent lists the subnets EC2 found exhausted within exhaustedFor.
func (p *pressure) recent(now time.Time) []string {
	var out []string
	for s, at := range p.exhausted {
		if now.Sub(at) < exhaustedFor {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// poolSubnets are the subnets the pool uses and grows in.
func poolSubnets(n *Node) []string {
	out := []string{}
	if s := n.cloud.plan.SubnetID; s != "" {
		out = append(out, s)
	}
	for _, e := range n.pool.ENIs() {
		if e.SubnetID != "" && !slices.Contains(out, e.SubnetID) {
			out = append(out, e.SubnetID)
		}
	}
	slices.Sort(out)
	return out
}

// on says a subnet n's pool uses is under pressure.
func (p *pressure) on(n *Node) bool {
	if len(p.under) == 0 {
		return false
	}
	return slices.ContainsFunc(poolSubnets(n), func(s string) bool { return slices.Contains(p.under, s) })
}
