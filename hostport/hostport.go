// Package hostport is what vpcnet knows of a pod's hostPorts: the port
// mappings the runtime passes to the plugin (the CNI "portMappings"
// capability), checked once, and the node's set of them, which the agent
// keeps on disk and the dataplane turns into nftables rules.
//
// vpcnet maps hostPorts itself rather than chaining the reference portmap
// plugin: one process fewer per pod ADD and DEL (on the benchmark machine
// portmap's start and exit cost about 20 ms of CPU a pod, most of a
// burst's CPU after its addresses arrive), and the rules are the agent's,
// rebuilt from its state after a restart and removed with the pod's
// address even when a DEL never comes.
package hostport

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/vpcnet/vpcnet/ipam"
)

// Protocol is a transport protocol a hostPort can carry.
type Protocol string

// The protocols Kubernetes allows in a container port.
const (
	TCP  Protocol = "tcp"
	UDP  Protocol = "udp"
	SCTP Protocol = "sctp"
)

// Mapping sends one host port to one port of the pod.
type Mapping struct {
	// HostIP limits the mapping to one address of the node; the zero
	// value means every address of the node.
	HostIP        netip.Addr `json:"hostIP,omitzero"`
	HostPort      uint16     `json:"hostPort"`
	ContainerPort uint16     `json:"containerPort"`
	Protocol      Protocol   `json:"protocol"`
}

func (m Mapping) String() string {
	host := "*"
	if m.HostIP.IsValid() {
		host = m.HostIP.String()
	}
	return fmt.Sprintf("%s:%d/%s->%d", host, m.HostPort, m.Protocol, m.ContainerPort)
}

// Parse checks one entry of the runtime's portMappings for a pod of one
// family (ipv6: an IPv6 pod). skip is true for an entry whose hostIP is of
// the other family, which cannot apply to the pod: the reference portmap
// plugin ignores such entries as well.
func Parse(hostPort, containerPort int, protocol, hostIP string, ipv6 bool) (m Mapping, skip bool, err error) {
	if hostPort < 1 || hostPort > 65535 {
		return Mapping{}, false, fmt.Errorf("hostPort %d is not a port number (1-65535)", hostPort)
	}
	if containerPort < 1 || containerPort > 65535 {
		return Mapping{}, false, fmt.Errorf("containerPort %d is not a port number (1-65535)", containerPort)
	}
	switch p := Protocol(strings.ToLower(protocol)); p {
	case "":
		m.Protocol = TCP // what Kubernetes defaults to
	case TCP, UDP, SCTP:
		m.Protocol = p
	default:
		return Mapping{}, false, fmt.Errorf("protocol %q is not tcp, udp or sctp", protocol)
	}
	if hostIP != "" {
		a, err := netip.ParseAddr(hostIP)
		if err != nil {
			return Mapping{}, false, fmt.Errorf("hostIP %q is not an IP address", hostIP)
		}
		a = a.Unmap()
		if a.Is6() != ipv6 {
			return Mapping{}, true, nil
		}
		if !a.IsUnspecified() {
			m.HostIP = a
		}
	}
	m.HostPort, m.ContainerPort = uint16(hostPort), uint16(containerPort)
	return m, false, nil
}

// Entry is one attachment's mappings, to the address it holds.
type Entry struct {
	Key      ipam.Key   `json:"key"`
	Pod      ipam.Pod   `json:"pod"`
	Addr     netip.Addr `json:"addr"`
	Mappings []Mapping  `json:"mappings"`
}

// clashes reports whether a and b would take the same packets.
func clashes(a, b Mapping) bool {
	return a.HostPort == b.HostPort && a.Protocol == b.Protocol &&
		(!a.HostIP.IsValid() || !b.HostIP.IsValid() || a.HostIP == b.HostIP)
}

// Set is the node's hostPorts, by attachment. The zero value is empty.
type Set struct {
	entries map[ipam.Key]Entry
}

// Put records e, replacing what e.Key had. A mapping that takes packets
// another attachment's mapping takes is refused, naming both: the
// scheduler keeps hostPorts apart, so a clash means a pod the agent still
// counts as live, and the first pod keeps its port.
func (s *Set) Put(e Entry) error {
	for i, m := range e.Mappings {
		for _, n := range e.Mappings[:i] {
			if clashes(m, n) {
				return fmt.Errorf("port mappings %s and %s take the same packets", n, m)
			}
		}
		for _, other := range s.entries {
			if other.Key == e.Key {
				continue
			}
			for _, n := range other.Mappings {
				if clashes(m, n) {
					return fmt.Errorf("hostPort %s is taken by pod %s (%s, %s)", m, other.Pod, other.Addr, other.Key)
				}
			}
		}
	}
	if len(e.Mappings) == 0 {
		s.Drop(e.Key)
		return nil
	}
	if s.entries == nil {
		s.entries = map[ipam.Key]Entry{}
	}
	e.Mappings = slices.Clone(e.Mappings)
	s.entries[e.Key] = e
	return nil
}

// Drop forgets key's mappings and reports whether it had any.
func (s *Set) Drop(key ipam.Key) bool {
	_, ok := s.entries[key]
	delete(s.entries, key)
	return ok
}

// Get returns key's entry.
func (s *Set) Get(key ipam.Key) (Entry, bool) {
	e, ok := s.entries[key]
	return e, ok
}

// Entries lists the set in a fixed order (by address, then key), so the
// rules written from it are the same for the same set.
func (s *Set) Entries() []Entry {
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	return out
}

// Clone is a copy of the set that later changes to either do not touch.
func (s *Set) Clone() Set {
	out := Set{entries: make(map[ipam.Key]Entry, len(s.entries))}
	for k, e := range s.entries {
		e.Mappings = slices.Clone(e.Mappings)
		out.entries[k] = e
	}
	return out
}

// Equal reports whether both sets map the same ports of the same
// attachments to the same addresses.
func (s *Set) Equal(o Set) bool {
	return maps.EqualFunc(s.entries, o.entries, func(a, b Entry) bool {
		return a.Pod == b.Pod && a.Addr == b.Addr && slices.Equal(a.Mappings, b.Mappings)
	})
}

// Len is the number of attachments with hostPorts.
func (s *Set) Len() int { return len(s.entries) }

// fileVersion is the format of the agent's hostport file.
const fileVersion = 1

type file struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Encode is the set as the agent keeps it on disk.
func (s *Set) Encode() ([]byte, error) {
	return json.MarshalIndent(file{Version: fileVersion, Entries: s.Entries()}, "", "  ")
}

// Decode reads what Encode wrote, checking every entry as Put and Parse
// would: a set read back holds nothing the plugin could not have sent.
func Decode(data []byte) (Set, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return Set{}, fmt.Errorf("not a hostport file: %w", err)
	}
	if f.Version != fileVersion {
		return Set{}, fmt.Errorf("version %d, this vpcnetd reads version %d", f.Version, fileVersion)
	}
	var s Set
	for i, e := range f.Entries {
		if e.Key.Network == "" || e.Key.ContainerID == "" || e.Key.IfName == "" || !e.Addr.IsValid() || e.Addr.Is4In6() || e.Addr.Zone() != "" || len(e.Mappings) == 0 {
			return Set{}, fmt.Errorf("entry %d (%s): needs an attachment, an IPv4 or IPv6 address and a mapping", i, e.Key)
		}
		for _, m := range e.Mappings {
			host := ""
			if m.HostIP.IsValid() {
				host = m.HostIP.String()
			}
			n, skip, err := Parse(int(m.HostPort), int(m.ContainerPort), string(m.Protocol), host, e.Addr.Is6())
			if err == nil && (skip || n != m) {
				err = errors.New("not as the plugin sends it")
			}
			if err != nil {
				return Set{}, fmt.Errorf("entry %d (%s): mapping %s: %w", i, e.Key, m, err)
			}
		}
		if _, dup := s.Get(e.Key); dup {
			return Set{}, fmt.Errorf("entry %d: %s appears twice", i, e.Key)
		}
		if err := s.Put(e); err != nil {
			return Set{}, fmt.Errorf("entry %d (%s): %w", i, e.Key, err)
		}
	}
	return s, nil
}
