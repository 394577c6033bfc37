package doctor

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// stateFindings: story 2. The checkpoint says who holds what, the host
// shows which pods live, EC2 what is attached; where they disagree, an
// address may be released under a live pod.
func stateFindings(f Facts) []Finding {
	var out []Finding
	if cp := f.Checkpoint; cp != nil && cp.Corrupt != "" {
		out = append(out, Finding{
			ID: "checkpoint-corrupt", Severity: Error,
			What:     "vpcnet's checkpoint does not decode, so the agent will not start",
			Evidence: []string{cp.Path + ": " + cp.Corrupt},
			Fix:      "the agent kept a copy beside it; restore the last good checkpoint if you have one, else move the file away: the agent then rebuilds from the host's pod routes and releases nothing in use",
		})
	}
	if f.Agent != nil {
		st := f.Agent.Status
		if len(st.Quarantined) > 0 {
			out = append(out, Finding{
				ID: "addresses-quarantined", Severity: Warning,
				What: fmt.Sprintf("%d addresses are routed to live pods on this host but missing from the checkpoint; the agent holds them (quarantine) instead of handing them out again",
					len(st.Quarantined)),
				Evidence: []string{"quarantined: " + strings.Join(st.Quarantined, ", ")},
				Fix:      "nothing to release by hand and never detach the ENI: the agent frees each address once its pod's route is gone; if the checkpoint was replaced by an older copy, find out what restored it",
			})
		}
		if len(st.StaleEntries) > 0 {
			var ev []string
			for _, h := range st.StaleEntries {
				ev = append(ev, fmt.Sprintf("%s held for %s (container %s) with no route on the host", h.Address, orDash(h.Pod), h.ContainerID))
			}
			out = append(out, Finding{
				ID: "checkpoint-stale-entries", Severity: Warning,
				What:     fmt.Sprintf("%d checkpoint entries name pods the host has no route for; the agent keeps them until the runtime's DEL or GC confirms the pod is gone", len(st.StaleEntries)),
				Evidence: ev,
				Fix:      "usually none: the runtime's CNI GC releases them; if they stay, delete the pods with kubectl or check that the runtime calls CNI GC (containerd 2.0 or later)",
			})
		}
	}
	out = append(out, checkpointBehindHost(f)...)
	out = append(out, checkpointNotOnENIs(f)...)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// checkpointBehindHost finds pods the host routes that the checkpoint
// does not name: the checkpoint is older than the pods (restored from a
// backup, or another node's).
func checkpointBehindHost(f Facts) []Finding {
	cp, h := f.Checkpoint, f.Host
	if cp == nil || h == nil || cp.Corrupt != "" {
		return nil
	}
	held := map[netip.Addr]bool{}
	for _, e := range cp.Entries {
		held[e.Addr] = true
	}
	var missing []string
	for _, r := range h.PodRoutes {
		if !held[r.Addr] {
			missing = append(missing, fmt.Sprintf("%s via %s", r.Addr, r.Dev))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ev := []string{fmt.Sprintf("checkpoint %s: %d entries, written %s", cp.Path, len(cp.Entries), cp.ModTime.UTC().Format("2006-01-02T15:04:05Z"))}
	if cp.Missing {
		ev[0] = "checkpoint " + cp.Path + " does not exist"
	}
	ev = append(ev, "routed on the host but not in the checkpoint: "+strings.Join(missing, ", "))
	return []Finding{{
		ID: "checkpoint-behind-host", Severity: Error,
		What:     fmt.Sprintf("the checkpoint is older than the host's pods: %d live pods' addresses are not in it", len(missing)),
		Evidence: ev,
		Fix:      "do not restart other nodes' agents from copies and never copy a checkpoint between nodes; vpcnetd quarantines these addresses until their pods go, so nothing is released under them; if it does not (see addresses-quarantined), keep the agent stopped and restore the newest checkpoint",
	}}
}

// checkpointNotOnENIs finds checkpoint addresses EC2 no longer has on any
// ENI of this instance: a pod holds an address the VPC will not deliver.
func checkpointNotOnENIs(f Facts) []Finding {
	cp, e := f.Checkpoint, f.EC2
	if cp == nil || e == nil || cp.Corrupt != "" || len(e.ENIs) == 0 {
		return nil
	}
	var missing []string
	for _, en := range cp.Entries {
		if !onAttached(e.ENIs, en.Addr) {
			missing = append(missing, fmt.Sprintf("%s (%s/%s)", en.Addr, orDash(en.Pod.Namespace), orDash(en.Pod.Name)))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Finding{{
		ID: "checkpoint-address-not-in-ec2", Severity: Error,
		What:     fmt.Sprintf("%d addresses the checkpoint gives to pods are on no ENI attached to this instance in EC2: those pods' traffic is not delivered", len(missing)),
		Evidence: []string{"not attached: " + strings.Join(missing, ", ")},
		Fix:      "find what unassigned them (CloudTrail: UnassignPrivateIpAddresses, DetachNetworkInterface) and recreate those pods so they get attached addresses",
	}}
}

func onAttached(enis []ENIFact, a netip.Addr) bool {
	for _, e := range enis {
		if e.DeviceIndex < 0 {
			continue
		}
		if e.PrimaryIP == a || slices.Contains(e.Secondary, a) {
			return true
		}
		for _, p := range slices.Concat(e.Prefixes, e.IPv6Prefixes) {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}
