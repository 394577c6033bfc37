package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// awsFile is the Amazon VPC CNI's CheckpointData (pkg/ipamd/datastore).
type awsFile struct {
	Version     string            `json:"version"`
	Allocations []json.RawMessage `json:"allocations"`
}

// awsEntry is the Amazon VPC CNI's CheckpointEntry: the IPAMKey fields
// inline, one address, the time it was assigned as Unix nanoseconds
// (AssignedTime.UnixNano()), and the pod's name.
type awsEntry struct {
	NetworkName         string `json:"networkName"`
	ContainerID         string `json:"containerID"`
	IfName              string `json:"ifName"`
	IPv4                string `json:"ipv4,omitempty"`
	IPv6                string `json:"ipv6,omitempty"`
	AllocationTimestamp int64  `json:"allocationTimestamp"`
	Metadata            struct {
		K8SPodNamespace string `json:"k8sPodNamespace"`
		K8SPodName      string `json:"k8sPodName"`
	} `json:"metadata"`
}

// decodeAWS reads the Amazon VPC CNI's checkpoint. Unknown fields are
// ignored, since we do not control that writer; everything we use is
// checked as strictly as our own format.
func decodeAWS(data []byte) (State, error) {
	var f awsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return State{}, describe(err, data, "")
	}
	s := State{Entries: make([]Entry, 0, len(f.Allocations))}
	for i, raw := range f.Allocations {
		where := fmt.Sprintf("allocations[%d]", i)
		var e awsEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return State{}, describe(err, raw, where)
		}
		got, err := e.toEntry()
		if err != nil {
			return State{}, fmt.Errorf("%s: %w", where, err)
		}
		s.Entries = append(s.Entries, got)
	}
	if err := checkUnique(s.Entries, "allocations"); err != nil {
		return State{}, err
	}
	return s, nil
}

func (e awsEntry) toEntry() (Entry, error) {
	key := ipam.Key{Network: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName}
	if err := checkKey(key); err != nil {
		return Entry{}, err
	}
	// aws-node writes one address per entry: ipv4, or ipv6 in its IPv6
	// mode (writeBackingStoreUnsafe), each of its own family.
	field, s, fam := "ipv4", e.IPv4, onlyIPv4
	switch {
	case e.IPv4 != "" && e.IPv6 != "":
		return Entry{}, fmt.Errorf("both ipv4 %q and ipv6 %q: aws-node records one address per entry", e.IPv4, e.IPv6)
	case e.IPv6 != "":
		field, s, fam = "ipv6", e.IPv6, onlyIPv6
	case e.IPv4 == "":
		return Entry{}, errors.New("no ipv4 or ipv6 address")
	}
	addr, err := parseAddr(field, s, fam)
	if err != nil {
		return Entry{}, err
	}
	var at time.Time
	// A zero timestamp means none was recorded; keep it unknown rather
	// than claim 1970.
	if e.AllocationTimestamp != 0 {
		at = time.Unix(0, e.AllocationTimestamp).UTC()
	}
	got := Entry{
		Key:        key,
		Addr:       addr,
		Pod:        ipam.Pod{Namespace: e.Metadata.K8SPodNamespace, Name: e.Metadata.K8SPodName},
		AssignedAt: at,
	}
	// The checks above give the precise errors; this one is what Encode
	// applies, so an imported state can always be written as ours.
	if err := checkEntry(got); err != nil {
		return Entry{}, err
	}
	return got, nil
}

// AWSFormatVersion is the version stamp of the Amazon VPC CNI's
// checkpoint (pkg/ipamd/datastore CheckpointFormatVersion); aws-node
// refuses a file with any other.
const AWSFormatVersion = "vpc-cni-ipam/1"

// EncodeAWS writes s in the Amazon VPC CNI's checkpoint format, which
// aws-node restores its assignments from when it starts: what a node
// switched back from vpcnet needs so that aws-node neither hands a live
// pod's address to another pod nor forgets to release it. Each entry
// keeps its pod's name and namespace, by which aws-node checks the pod's
// host veth still exists; an entry with none it keeps unchecked.
func EncodeAWS(s State) ([]byte, error) {
	f := struct {
		Version     string     `json:"version"`
		Allocations []awsEntry `json:"allocations"`
	}{Version: AWSFormatVersion, Allocations: make([]awsEntry, 0, len(s.Entries))}
	for i, e := range s.Entries {
		if err := checkEntry(e); err != nil {
			return nil, fmt.Errorf("checkpoint: encode Entries[%d] for the Amazon VPC CNI: %w", i, err)
		}
	}
	if err := checkUnique(s.Entries, "Entries"); err != nil {
		return nil, fmt.Errorf("checkpoint: encode for the Amazon VPC CNI: %w", err)
	}
	sorted := slices.Clone(s.Entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return a.Addr.Compare(b.Addr) })
	for _, e := range sorted {
		a := awsEntry{NetworkName: e.Key.Network, ContainerID: e.Key.ContainerID, IfName: e.Key.IfName}
		if e.Addr.Is6() {
			a.IPv6 = e.Addr.String()
		} else {
			a.IPv4 = e.Addr.String()
		}
		if !e.AssignedAt.IsZero() {
			a.AllocationTimestamp = e.AssignedAt.UnixNano()
		}
		a.Metadata.K8SPodNamespace, a.Metadata.K8SPodName = e.Pod.Namespace, e.Pod.Name
		f.Allocations = append(f.Allocations, a)
	}
	return json.Marshal(f)
}
