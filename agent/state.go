package agent

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/ipam"
)

// quarantineNetwork marks the synthetic owners of quarantined addresses.
// No CNI network can carry the name: it is not a valid network name.
const quarantineNetwork = "vpcnet:quarantine"

func quarantineKey(addr netip.Addr) ipam.Key {
	return ipam.Key{Network: quarantineNetwork, ContainerID: addr.String(), IfName: "host-route"}
}

func isQuarantine(k ipam.Key) bool { return k.Network == quarantineNetwork }

// stateLocked is what the checkpoint must hold: every real assignment in
// the pool and every stale entry still waiting for an operator, less the
// attachments in without.
func (a *Agent) stateLocked(without map[ipam.Key]bool) checkpoint.State {
	var s checkpoint.State
	for _, as := range a.pool.Assignments() {
		if isQuarantine(as.Key) || without[as.Key] {
			continue
		}
		s.Entries = append(s.Entries, checkpoint.Entry{Key: as.Key, Addr: as.Addr, Pod: as.Pod, AssignedAt: as.AssignedAt})
	}
	for _, e := range a.stale {
		if !without[e.Key] {
			s.Entries = append(s.Entries, e)
		}
	}
	slices.SortFunc(s.Entries, func(x, y checkpoint.Entry) int { return x.Addr.Compare(y.Addr) })
	return s
}

// saveLocked writes the checkpoint, less the attachments in without.
// Nothing another party can see changes before it is durable: Add saves
// after the pool assigns and undoes on failure; Del saves without the key
// before the pool lets the address go.
func (a *Agent) saveLocked(without map[ipam.Key]bool) error {
	start := a.now()
	err := disk.Save(a.cfg.CheckpointPath(), a.stateLocked(without))
	a.met.checkpointWrite.Observe(a.now().Sub(start).Seconds())
	if err != nil {
		a.met.checkpointErrors.Inc()
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// dropStaleLocked forgets a stale checkpoint entry for key: the runtime is
// asking about that attachment again, so it is the authority now.
func (a *Agent) dropStaleLocked(key ipam.Key) bool {
	i := slices.IndexFunc(a.stale, func(e checkpoint.Entry) bool { return e.Key == key })
	if i < 0 {
		return false
	}
	a.stale = slices.Delete(a.stale, i, i+1)
	return true
}

func (a *Agent) isStaleLocked(key ipam.Key) bool {
	return slices.ContainsFunc(a.stale, func(e checkpoint.Entry) bool { return e.Key == key })
}
