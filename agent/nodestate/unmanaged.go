package nodestate

import (
	"slices"

	"github.com/vpcnet/vpcnet/ipam"
)

// UnmanagedENI is an interface attached to the instance that vpcnet does
// not own: a trunk (security groups for pods), an EFA or efa-only
// interface, anything on a network card other than 0, or an ENI tagged
// node.k8s.amazonaws.com/no_manage=true. It is never set up, pooled or
// detached; on network card 0 it holds a device index and one of the
// card's ENI slots, so the pool may attach one ENI fewer.
type UnmanagedENI struct {
	ID          string
	NetworkCard int
	DeviceIndex int
	// Reason says why it is not vpcnet's, for logs and /v1/status.
	Reason string
}

// unmanaged is what the machine knows of the interfaces it leaves alone.
type unmanaged struct {
	enis []UnmanagedENI
}

// set records what EC2 last said, logging each interface the first time
// it is seen so an operator learns why fewer ENIs are left for pods.
func (x *unmanaged) set(n *Node, enis []UnmanagedENI) {
	for _, e := range enis {
		if !slices.ContainsFunc(x.enis, func(o UnmanagedENI) bool { return o.ID == e.ID }) {
			n.log.Info("interface left alone: not vpcnet's", "eni", e.ID, "card", e.NetworkCard, "device", e.DeviceIndex, "reason", e.Reason)
		}
	}
	x.enis = slices.Clone(enis)
}

// slotsTaken is how many of network card 0's ENI slots they hold.
func (x *unmanaged) slotsTaken() int {
	k := 0
	for _, e := range x.enis {
		if e.NetworkCard == 0 {
			k++
		}
	}
	return k
}

// limits are the instance's limits as the planner must see them: card
// 0's ENI limit less the slots interfaces vpcnet does not own hold. The
// primary ENI always counts, so the limit never drops below 1.
func (n *Node) limits() ipam.Limits {
	l := n.cfg.Limits
	l.MaxENIs = max(1, l.MaxENIs-n.unmanaged.slotsTaken())
	return l
}
