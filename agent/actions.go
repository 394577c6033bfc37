package agent

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

func (a *Agent) assignBlocks(ctx context.Context, act ipam.Action) error {
	var blocks []netip.Prefix
	if act.Prefixes {
		ps, err := a.cloud.AssignPrefixes(ctx, act.ENIID, act.Count)
		if err != nil {
			return err
		}
		blocks = ps
	} else {
		ips, err := a.cloud.AssignAddresses(ctx, act.ENIID, act.Count)
		if err != nil {
			return err
		}
		for _, ip := range ips {
			blocks = append(blocks, netip.PrefixFrom(ip, 32))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range blocks {
		if err := a.pool.AddBlock(act.ENIID, b); err != nil {
			return fmt.Errorf("add %s to the pool: %w", b, err)
		}
	}
	a.wakeLocked()
	return nil
}

// attachENI creates an ENI that already carries its addresses and our
// tags (one call), attaches it at device index dev, waits for EC2 to say
// attached, sets up the host side, and only then offers its addresses.
func (a *Agent) attachENI(ctx context.Context, act ipam.Action, dev int) error {
	a.mu.Lock()
	instanceID := a.self.InstanceID
	a.mu.Unlock()
	in := cloud.CreateENIInput{
		SubnetID:       act.SubnetID,
		SecurityGroups: act.SecurityGroups,
		Description:    "vpcnet pod addresses for " + instanceID,
		Tags:           a.cfg.AdditionalENITags,
	}
	if act.Prefixes {
		in.Prefixes = act.Count
	} else {
		in.SecondaryAddresses = act.Count
	}
	eni, err := a.cloud.CreateENI(ctx, in)
	if err != nil {
		return err
	}
	attachmentID, err := a.cloud.AttachENI(ctx, eni.ID, instanceID, dev)
	if err != nil {
		if derr := a.cloud.DeleteENI(context.WithoutCancel(ctx), eni.ID); derr != nil {
			a.log.Warn("could not delete an ENI that failed to attach; the leak collector will", "eni", eni.ID, "err", derr)
		}
		return err
	}
	if err := a.cloud.SetDeleteOnTermination(ctx, eni.ID, attachmentID, true); err != nil {
		a.log.Warn("DeleteOnTermination not set; the leak collector covers this ENI if the instance dies", "eni", eni.ID, "err", err)
	}
	attached, err := a.waitAttached(ctx, eni.ID)
	if err != nil {
		return err
	}
	return a.adoptENI(ctx, attached)
}

// waitAttached polls EC2 until the ENI's attachment is "attached".
func (a *Agent) waitAttached(ctx context.Context, eniID string) (cloud.ENI, error) {
	ctx, cancel := context.WithTimeout(ctx, a.attachTimeout)
	defer cancel()
	delay := 200 * time.Millisecond
	for {
		enis, err := a.cloud.DescribeENIs(ctx, eniID)
		if err == nil && len(enis) == 1 && enis[0].Attachment != nil && enis[0].Attachment.State == cloud.AttachmentAttached {
			return enis[0], nil
		}
		select {
		case <-ctx.Done():
			return cloud.ENI{}, fmt.Errorf("wait for %s to attach: %w (last error: %v)", eniID, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// confirmAttached asks EC2, not IMDS, whether the ENI is attached to this
// instance: nothing is released on a hint.
func (a *Agent) confirmAttached(ctx context.Context, eniID string) (cloud.ENI, error) {
	enis, err := a.cloud.DescribeENIs(ctx, eniID)
	if err != nil {
		return cloud.ENI{}, err
	}
	a.mu.Lock()
	self := a.self.InstanceID
	a.mu.Unlock()
	if len(enis) != 1 || enis[0].Attachment == nil || enis[0].Attachment.InstanceID != self {
		return cloud.ENI{}, fmt.Errorf("%s is not attached to %s in EC2: %w", eniID, self, errSkipped)
	}
	return enis[0], nil
}

// releaseBlocks gives back blocks that are provably unused: attached to
// this instance per EC2, entirely free in the pool (so in no checkpoint
// entry and past cooldown), and routed to no pod on the host.
func (a *Agent) releaseBlocks(ctx context.Context, act ipam.Action) error {
	eni, err := a.confirmAttached(ctx, act.ENIID)
	if err != nil {
		return err
	}
	onENI := make(map[netip.Prefix]bool)
	for _, b := range blocksOf(eni) {
		onENI[b] = true
	}
	// Read the host again rather than trust the pass's earlier look: a pod
	// wired since then must still stop the release.
	routed, err := a.host.PodAddrs(ctx)
	if err != nil {
		return fmt.Errorf("read host pod routes before release: %w", err)
	}
	a.mu.Lock()
	if h := a.hold; h != "" {
		a.mu.Unlock()
		a.log.Warn("release on hold", "eni", act.ENIID, "why", h)
		return errSkipped
	}
	now := a.now()
	var removed []netip.Prefix
	for _, b := range act.Blocks {
		if !onENI[b] || routesInto(routed, b) {
			continue
		}
		if err := a.pool.RemoveBlock(b, now); err != nil {
			continue // a pod took an address since the plan, or it cools
		}
		removed = append(removed, b)
	}
	a.mu.Unlock()
	if len(removed) == 0 {
		return errSkipped
	}
	if err := a.unassign(ctx, act.ENIID, removed); err != nil {
		a.mu.Lock()
		for _, b := range removed {
			if aerr := a.pool.AddBlock(act.ENIID, b); aerr != nil {
				a.log.Error("could not return a block to the pool after a failed release", "block", b.String(), "err", aerr)
			}
		}
		a.wakeLocked()
		a.mu.Unlock()
		return err
	}
	return nil
}

func (a *Agent) unassign(ctx context.Context, eniID string, blocks []netip.Prefix) error {
	var ips []netip.Addr
	var prefixes []netip.Prefix
	for _, b := range blocks {
		if b.Bits() == 32 {
			ips = append(ips, b.Addr())
		} else {
			prefixes = append(prefixes, b)
		}
	}
	if len(ips) > 0 {
		if err := a.cloud.UnassignAddresses(ctx, eniID, ips); err != nil {
			return err
		}
	}
	if len(prefixes) > 0 {
		return a.cloud.UnassignPrefixes(ctx, eniID, prefixes)
	}
	return nil
}

func routesInto(routed []netip.Addr, b netip.Prefix) bool {
	for _, ip := range routed {
		if b.Contains(ip) {
			return true
		}
	}
	return false
}

// detachENI removes an ENI whose every address is free, after EC2 confirms
// it is ours and attached. The ENI leaves the pool first, so no pod can be
// given one of its addresses while it goes.
func (a *Agent) detachENI(ctx context.Context, act ipam.Action) error {
	eni, err := a.confirmAttached(ctx, act.ENIID)
	if err != nil {
		return err
	}
	routed, err := a.host.PodAddrs(ctx)
	if err != nil {
		return fmt.Errorf("read host pod routes before detach: %w", err)
	}
	for _, b := range blocksOf(eni) {
		if routesInto(routed, b) {
			return errSkipped
		}
	}
	a.mu.Lock()
	if h := a.hold; h != "" {
		a.mu.Unlock()
		a.log.Warn("detach on hold", "eni", act.ENIID, "why", h)
		return errSkipped
	}
	pe, _ := a.pool.ENI(act.ENIID)
	if err := a.pool.RemoveENI(act.ENIID, a.now()); err != nil {
		a.mu.Unlock()
		return errSkipped
	}
	delete(a.eniMeta, act.ENIID)
	a.mu.Unlock()

	if err := a.host.TeardownENI(ctx, ENINet{ID: eni.ID, MAC: eni.MAC, DeviceIndex: pe.DeviceIndex, PrimaryIP: eni.PrimaryIP, SubnetCIDR: pe.SubnetCIDR, MTU: a.cfg.ENIMTU}); err != nil {
		a.log.Warn("host teardown of a detaching ENI failed", "eni", eni.ID, "err", err)
	}
	if err := a.cloud.DetachENI(ctx, eni.Attachment.ID, false); err != nil {
		return err
	}
	if err := a.waitAvailable(ctx, eni.ID); err != nil {
		a.log.Warn("ENI detached but not yet available; the leak collector deletes it later", "eni", eni.ID, "err", err)
		return nil
	}
	if err := a.cloud.DeleteENI(ctx, eni.ID); err != nil && !cloud.IsNotFound(err) {
		a.log.Warn("detached ENI not deleted; the leak collector deletes it later", "eni", eni.ID, "err", err)
	}
	return nil
}

// waitAvailable polls EC2 until a detached ENI is "available".
func (a *Agent) waitAvailable(ctx context.Context, eniID string) error {
	ctx, cancel := context.WithTimeout(ctx, a.attachTimeout)
	defer cancel()
	delay := 200 * time.Millisecond
	for {
		enis, err := a.cloud.DescribeENIs(ctx, eniID)
		if err == nil && (len(enis) == 0 || enis[0].Status == cloud.StatusAvailable) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to detach: %w", eniID, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}
