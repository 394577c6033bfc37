package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// tagNoManage is the Amazon VPC CNI's opt-out: an ENI carrying it belongs
// to someone else (a trunk, EFA, a user's own interface) and is never used.
const tagNoManage = "node.k8s.amazonaws.com/no_manage"

// syncFromEC2 makes the pool's ENIs and blocks match what EC2, not IMDS,
// says is attached. It adds what is new, drops only what is gone and free,
// and reports anything gone that a pod still holds.
func (a *Agent) syncFromEC2(ctx context.Context) error {
	a.mu.Lock()
	self := a.self
	a.mu.Unlock()
	enis, err := a.cloud.ListENIs(ctx, cloud.ENIFilter{InstanceID: self.InstanceID})
	if err != nil {
		return fmt.Errorf("list ENIs attached to %s: %w", self.InstanceID, err)
	}
	attached := make(map[string]cloud.ENI)
	for _, e := range enis {
		if e.Attachment == nil || e.Attachment.InstanceID != self.InstanceID || e.Attachment.State != cloud.AttachmentAttached {
			continue
		}
		if e.Tags[tagNoManage] == "true" {
			continue
		}
		attached[e.ID] = e
	}
	ids := make([]string, 0, len(attached))
	for id := range attached {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := a.adoptENI(ctx, attached[id]); err != nil {
			return err
		}
	}
	a.dropVanished(attached)
	return nil
}

// adoptENI brings one attached ENI and all its addresses into the pool,
// setting up its host side first so no pod is given an address the host
// cannot route yet.
func (a *Agent) adoptENI(ctx context.Context, e cloud.ENI) error {
	a.mu.Lock()
	_, known := a.pool.ENI(e.ID)
	a.mu.Unlock()
	idx := e.Attachment.DeviceIndex
	if !known {
		cidr, err := a.subnetCIDR(ctx, e.SubnetID)
		if err != nil {
			return err
		}
		if idx != 0 {
			if err := a.host.SetupENI(ctx, ENINet{ID: e.ID, MAC: e.MAC, DeviceIndex: idx, PrimaryIP: e.PrimaryIP, SubnetCIDR: cidr, MTU: a.cfg.ENIMTU}); err != nil {
				return fmt.Errorf("set up host side of %s: %w", e.ID, err)
			}
		}
		created := a.now()
		if t, err := time.Parse(time.RFC3339, e.Tags[cloud.TagCreatedAt]); err == nil {
			created = t
		}
		a.mu.Lock()
		err = a.pool.AddENI(ipam.ENI{
			ID: e.ID, DeviceIndex: idx, Primary: idx == 0, SubnetID: e.SubnetID, SubnetCIDR: cidr,
			SecurityGroups: e.SecurityGroups, PrimaryIP: e.PrimaryIP, CreatedAt: created,
		})
		a.mu.Unlock()
		if err != nil {
			return fmt.Errorf("adopt %s: %w", e.ID, err)
		}
		a.log.Info("ENI in use by the pool", "eni", e.ID, "device", idx, "subnet", e.SubnetID, "addresses", len(e.SecondaryIPs), "prefixes", len(e.Prefixes))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.eniMeta[e.ID] = eniMeta{MAC: e.MAC, AttachmentID: e.Attachment.ID}
	added, unused := 0, 0
	have := a.blocksLocked()
	for _, p := range blocksOf(e) {
		if have[p] {
			continue
		}
		if idx == 0 && !a.usesPrimaryBlockLocked(p) {
			unused++
			continue
		}
		if err := a.pool.AddBlock(e.ID, p); err != nil {
			return fmt.Errorf("adopt %s on %s: %w", p, e.ID, err)
		}
		added++
	}
	if added > 0 {
		a.wakeLocked()
	}
	if unused > 0 && !known {
		a.log.Warn("custom networking: the primary ENI's secondary addresses are not used for pods; they stay assigned in EC2 until the node is replaced",
			"eni", e.ID, "blocks", unused)
	}
	return nil
}

func blocksOf(e cloud.ENI) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(e.SecondaryIPs)+len(e.Prefixes))
	for _, ip := range e.SecondaryIPs {
		out = append(out, netip.PrefixFrom(ip, 32))
	}
	return append(out, e.Prefixes...)
}

// blocksLocked is the set of blocks in the pool.
func (a *Agent) blocksLocked() map[netip.Prefix]bool {
	have := make(map[netip.Prefix]bool)
	for _, e := range a.pool.Snapshot(a.now()).ENIs {
		for _, b := range e.Blocks {
			have[b.Prefix] = true
		}
	}
	return have
}

// dropVanished removes from the pool the free blocks and ENIs that EC2 no
// longer shows attached. What a pod still holds is kept and reported: the
// pod's address is gone from the VPC, and an operator must look.
func (a *Agent) dropVanished(attached map[string]cloud.ENI) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for _, es := range a.pool.Stats(now).ENIs {
		e, ok := attached[es.ID]
		if !ok {
			if err := a.pool.RemoveENI(es.ID, now); err != nil {
				a.log.Error("ENI no longer attached in EC2 but pods hold its addresses", "eni", es.ID, "err", err)
				continue
			}
			delete(a.eniMeta, es.ID)
			a.log.Warn("ENI no longer attached in EC2: dropped from the pool", "eni", es.ID)
			continue
		}
		want := blocksOf(e)
		for _, b := range es.Blocks {
			if slices.Contains(want, b.Prefix) {
				continue
			}
			if err := a.pool.RemoveBlock(b.Prefix, now); err != nil {
				a.log.Error("address block no longer on its ENI in EC2 but pods hold it", "eni", es.ID, "block", b.Prefix.String(), "err", err)
				continue
			}
			a.log.Warn("address block no longer on its ENI in EC2: dropped from the pool", "eni", es.ID, "block", b.Prefix.String())
		}
	}
}

// subnetCIDR finds a subnet's CIDR, from IMDS's view of the node when it
// has it, else from EC2.
func (a *Agent) subnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error) {
	a.mu.Lock()
	cidr, ok := a.subnets[subnetID]
	for _, i := range a.self.Interfaces {
		if !ok && i.SubnetID == subnetID && i.SubnetCIDR.IsValid() {
			cidr, ok = i.SubnetCIDR, true
		}
	}
	a.mu.Unlock()
	if ok {
		return cidr, nil
	}
	subnets, err := a.cloud.DescribeSubnets(ctx, subnetID)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("describe subnet %s: %w", subnetID, err)
	}
	if len(subnets) != 1 {
		return netip.Prefix{}, fmt.Errorf("describe subnet %s: EC2 returned %d subnets", subnetID, len(subnets))
	}
	a.mu.Lock()
	a.subnets[subnetID] = subnets[0].CIDR
	a.mu.Unlock()
	return subnets[0].CIDR, nil
}
