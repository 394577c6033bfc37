// Package checkpoint is the codec of the agent's durable record of who
// holds which address. It turns a State into bytes and back and refuses
// anything it cannot trust: truncated or corrupt input, an unknown version,
// an owner recorded twice, an address held by two owners. It also reads the
// Amazon VPC CNI's checkpoint so a node can switch over in place.
//
// The package does no I/O and reads no clock (a test enforces it); the
// file handling lives in checkpoint/disk.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Version is the format Encode writes and Decode reads.
const Version = "vpcnet/1"

// AWSVersion is the format of the Amazon VPC CNI's checkpoint
// (/var/run/aws-node/ipam.json), which Decode also reads.
const AWSVersion = "vpc-cni-ipam/1"

// State is every assignment on the node, and the addresses released
// recently. Decode returns the entries and releases sorted by address;
// Encode accepts them in any order.
type State struct {
	Entries []Entry
	// Released are the addresses given back within the last cooldown
	// (IP_COOLDOWN_PERIOD), each with when: after a restart an address
	// cools only for what is left of its own cooldown, not for a whole
	// one. Meaningful only with ReleasesKnown.
	Released []Release
	// ReleasesKnown says Released is complete: every free address not in
	// it was released longer than a cooldown ago. Checkpoints written
	// before release times were recorded, and the Amazon VPC CNI's, do
	// not know; then any free address may have been released just now.
	// Encode writes Released only when this is set.
	ReleasesKnown bool
}

// Release is one address given back, and when.
type Release struct {
	Addr netip.Addr
	At   time.Time
}

// Entry is one address held by one owner.
type Entry struct {
	Key  ipam.Key
	Addr netip.Addr
	Pod  ipam.Pod
	// AssignedAt is when the address was handed out. It is the zero time
	// for entries migrated from an Amazon VPC CNI checkpoint that did not
	// record one.
	AssignedAt time.Time
	// UnroutedSince is since when the host has had no route to Addr, as
	// the agent first saw it; zero when routed or not known. The agent
	// reclaims an address missing long enough, and the clock must survive
	// its restarts: an agent in a crash loop would otherwise never reach
	// the end of it.
	UnroutedSince time.Time
}

// file is the vpcnet/1 document. Released is absent in files written
// before release times were recorded (and then not known).
type file struct {
	Version     string             `json:"version"`
	Assignments []json.RawMessage  `json:"assignments"`
	Released    *[]json.RawMessage `json:"released,omitempty"`
}

// released is one vpcnet/1 release.
type released struct {
	Address    string `json:"address"`
	ReleasedAt string `json:"releasedAt"`
}

// entry is one vpcnet/1 assignment.
type entry struct {
	Network      string `json:"network"`
	ContainerID  string `json:"containerID"`
	IfName       string `json:"ifName"`
	Address      string `json:"address"`
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	AssignedAt   string `json:"assignedAt"`
	// UnroutedSince is absent when zero, as in files written before it
	// was recorded.
	UnroutedSince string `json:"unroutedSince,omitempty"`
}

// Encode returns s as a vpcnet/1 document, one assignment per line sorted
// by address so that files diff cleanly. It refuses a state that Decode
// would refuse, so a bug upstream can never write a checkpoint the agent
// cannot read back.
func Encode(s State) ([]byte, error) {
	for i, e := range s.Entries {
		if err := checkEntry(e); err != nil {
			return nil, fmt.Errorf("checkpoint: encode Entries[%d]: %w", i, err)
		}
	}
	if err := checkUnique(s.Entries, "Entries"); err != nil {
		return nil, fmt.Errorf("checkpoint: encode: %w", err)
	}
	var rel []Release
	if s.ReleasesKnown {
		if err := checkReleases(s.Released, s.Entries, "Released"); err != nil {
			return nil, fmt.Errorf("checkpoint: encode: %w", err)
		}
		rel = slices.Clone(s.Released)
		slices.SortFunc(rel, func(a, b Release) int { return a.Addr.Compare(b.Addr) })
	}
	sorted := slices.Clone(s.Entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return a.Addr.Compare(b.Addr) })

	var b bytes.Buffer
	b.Grow(64 + 200*len(sorted))
	fmt.Fprintf(&b, "{\"version\":%q,\"assignments\":[", Version)
	for i, e := range sorted {
		ent := entry{
			Network:      e.Key.Network,
			ContainerID:  e.Key.ContainerID,
			IfName:       e.Key.IfName,
			Address:      e.Addr.String(),
			PodNamespace: e.Pod.Namespace,
			PodName:      e.Pod.Name,
			AssignedAt:   e.AssignedAt.UTC().Format(time.RFC3339Nano),
		}
		if !e.UnroutedSince.IsZero() {
			ent.UnroutedSince = e.UnroutedSince.UTC().Format(time.RFC3339Nano)
		}
		line, err := json.Marshal(ent)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: encode %s: %w", e.Key, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]")
	if s.ReleasesKnown {
		b.WriteString(`,"released":[`)
		for i, r := range rel {
			line, err := json.Marshal(released{Address: r.Addr.String(), ReleasedAt: r.At.UTC().Format(time.RFC3339Nano)})
			if err != nil {
				return nil, fmt.Errorf("checkpoint: encode release of %s: %w", r.Addr, err)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n")
			b.Write(line)
		}
		b.WriteString("\n]")
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}
