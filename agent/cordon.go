package agent

import (
	"context"

	"github.com/vpcnet/vpcnet/agent/nodestate"
)

// noteCordon holds the pool while the node is cordoned, unless
// AWS_MANAGE_ENIS_NON_SCHEDULABLE=true: the Amazon VPC CNI's default,
// which a node switched from it keeps (a drained node takes no more
// addresses from the subnet, and keeps the ENIs its pods may still
// use). last is the hold the state machine was last told; the first
// call has false, which the machine starts with.
//
// aws-node reads the Node on each pass and treats a failed read as not
// cordoned; vpcnet keeps the Node it last saw, so an unreachable API
// server does not lift a hold. Until the Node is first read, the node
// counts as schedulable, as there.
func (a *Agent) noteCordon(ctx context.Context, last bool) bool {
	hold := a.kube.State().Cordoned && !a.cfg.ManageENIsNonSchedulable
	if hold == last || !a.send(ctx, nodestate.CordonUpdate{Hold: hold}) {
		return last
	}
	return hold
}
