package agent

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// attachPhase runs the pass's ENI attachments and, while they are in
// flight, plans again whenever an Add kicks: a burst that arrives while
// one ENI attaches gets the further ENIs it needs now, not one attach
// delay later. replan sees the attachments in flight as ENIs whose every
// address is free, so it asks only for what they will not cover. The
// first failure stops further attachments; the phase returns it once
// those in flight are done.
func (a *Agent) attachPhase(ctx context.Context, acts []ipam.Action, replan func(inFlight []ipam.ENIState) []ipam.Action) error {
	type result struct {
		dev int
		err error
	}
	results := make(chan result)
	inFlight := map[int]ipam.Action{}
	var firstErr error
	launch := func(act ipam.Action) bool {
		if len(inFlight) >= maxParallelActions {
			return false
		}
		taken := make([]int, 0, len(inFlight))
		for dev := range inFlight {
			taken = append(taken, dev)
		}
		dev, ok := a.freeDevice(taken)
		if !ok {
			firstErr = fmt.Errorf("attach ENI: no free device index below %d", a.limits.MaxENIs)
			return false
		}
		a.log.Info("EC2 change", "action", act.Kind.String(), "count", act.Count, "device", dev, "reason", act.Reason)
		inFlight[dev] = act
		go func() { results <- result{dev, a.runAction(ctx, act, dev)} }()
		return true
	}
	for _, act := range acts {
		if !launch(act) {
			break
		}
	}
	for len(inFlight) > 0 {
		select {
		case r := <-results:
			delete(inFlight, r.dev)
			if r.err != nil && firstErr == nil {
				firstErr = r.err
			}
		case <-a.kickCh:
			if firstErr != nil {
				continue
			}
			for _, act := range replan(pendingENIs(inFlight, a.now)) {
				if act.Kind == ipam.AttachENI && !launch(act) {
					break
				}
			}
		}
	}
	// Kicks taken here asked for a plan; the next pass makes it with the
	// new ENIs in the pool.
	a.kick()
	return firstErr
}

// pendingENIs stands each attachment in flight in for the ENI it will
// add: its device index and blocks, all free. The block prefixes are
// placeholders in 0.0.0.0/8, which no VPC uses.
func pendingENIs(inFlight map[int]ipam.Action, now func() time.Time) []ipam.ENIState {
	var out []ipam.ENIState
	for dev, act := range inFlight {
		e := ipam.ENIState{ENI: ipam.ENI{
			ID: fmt.Sprintf("attaching-%d", dev), DeviceIndex: dev,
			SubnetID: act.SubnetID, SecurityGroups: act.SecurityGroups, CreatedAt: now(),
		}}
		size, bits := 1, 32
		if act.Prefixes {
			size, bits = 16, 28
		}
		for i := range act.Count {
			n := i * size
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{0, byte(dev), byte(n >> 8), byte(n)}), bits)
			e.Blocks = append(e.Blocks, ipam.BlockState{Prefix: p, Free: size})
		}
		out = append(out, e)
	}
	return out
}
