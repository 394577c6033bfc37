package checkpoint

import (
	"bytes"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

const v1Head = `{"version":"vpcnet/1","assignments":[`

// v1 wraps entries (JSON objects, comma separated) in a vpcnet/1 document.
func v1(entries string) string { return v1Head + entries + "]}" }

const good = `{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.5","assignedAt":"2026-01-02T03:04:05Z"}`

func TestDecodeRefusesBadInput(t *testing.T) {
	encoded, err := Encode(manyEntries(3))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "checkpoint: empty input (0 bytes): not a checkpoint"},
		{"only whitespace", " \n\n", "checkpoint: empty input (3 bytes): not a checkpoint"},
		{"truncated mid-file", string(encoded[:len(encoded)/2]),
			"checkpoint: truncated: input ends at line 3 in the middle of a value"},
		{"truncated before the end", string(encoded[:len(encoded)-3]),
			"checkpoint: truncated: input ends at line 5 in the middle of a value"},
		{"corrupt byte", strings.Replace(string(encoded), `"address":"10.1.0.2"`, `"address":"10.1.0.2"?`, 1),
			"checkpoint: invalid JSON at line 3, column 138: invalid character '?' after object key:value pair"},
		{"NUL bytes from a torn write", v1(good) + "\x00\x00\x00",
			"checkpoint: invalid JSON at line 1, column 151: invalid character '\\x00' after top-level value"},
		{"two documents", v1(good) + v1(good),
			"checkpoint: invalid JSON at line 1, column 151: invalid character '{' after top-level value"},
		{"not an object", `["vpcnet/1"]`, "checkpoint: the document is a JSON array, want an object"},
		{"no version", `{"assignments":[]}`,
			`checkpoint: no "version" field: not a vpcnet or Amazon VPC CNI checkpoint`},
		{"version is a number", `{"version":1,"assignments":[]}`,
			`checkpoint: "version" is a JSON number, want a string`},
		{"unknown version", `{"version":"vpcnet/2","assignments":[]}`,
			`checkpoint: unknown version "vpcnet/2"; this build reads "vpcnet/1" and "vpc-cni-ipam/1" (was it written by a newer vpcnet?)`},
		{"no assignments", `{"version":"vpcnet/1"}`, `checkpoint: no "assignments" list`},
		{"assignments not a list", `{"version":"vpcnet/1","assignments":{}}`,
			`checkpoint: "assignments" is a JSON object, want a list`},
		{"unknown top-level field", `{"version":"vpcnet/1","assignments":[],"extra":1}`,
			`checkpoint: unknown field "extra"`},
		{"entry not an object", v1(good + `,5`), "checkpoint: assignments[1] is a JSON number, want an object"},
		{"unknown entry field", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.5","assignedAt":"2026-01-02T03:04:05Z","eni":"eni-1"}`),
			`checkpoint: assignments[0]: unknown field "eni"`},
		{"address not an address", v1(good + `,{"network":"vpcnet","containerID":"b","ifName":"eth0","address":"10.0.0.x","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[1]: address "10.0.0.x" is not an IPv4 or IPv6 address`},
		{"address with leading zero", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.05","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: address "10.0.0.05" is not an IPv4 or IPv6 address`},
		{"IPv4-mapped IPv6 address", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"::ffff:10.0.0.5","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: address "::ffff:10.0.0.5" is not an IPv4 or IPv6 address`},
		{"unspecified address", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"0.0.0.0","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: address 0.0.0.0 is not a unicast address a pod can hold`},
		{"address is a number", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":167772165,"assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: "address" is a JSON number, want a string`},
		{"no address", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: no address`},
		{"no container id", v1(`{"network":"vpcnet","ifName":"eth0","address":"10.0.0.5","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: owner has no container id`},
		{"no network", v1(`{"containerID":"a","ifName":"eth0","address":"10.0.0.5","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: owner has no network name`},
		{"no interface", v1(`{"network":"vpcnet","containerID":"a","address":"10.0.0.5","assignedAt":"2026-01-02T03:04:05Z"}`),
			`checkpoint: assignments[0]: owner has no interface name`},
		{"no time", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.5"}`),
			`checkpoint: assignments[0]: no assignedAt time`},
		{"bad time", v1(`{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.5","assignedAt":"yesterday"}`),
			`checkpoint: assignments[0]: assignedAt "yesterday" is not an RFC 3339 time`},
		{"owner twice", v1(good + `,{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.6","assignedAt":"2026-01-02T03:04:05Z"}`),
			"checkpoint: assignments[0] and assignments[1] both record owner vpcnet/a/eth0 (addresses 10.0.0.5 and 10.0.0.6); an owner holds one address"},
		{"address held twice", v1(good + `,{"network":"vpcnet","containerID":"b","ifName":"eth0","address":"10.0.0.5","assignedAt":"2026-01-02T03:04:05Z"}`),
			"checkpoint: address 10.0.0.5 is held by two owners: assignments[0] (vpcnet/a/eth0) and assignments[1] (vpcnet/b/eth0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("Decode accepted it: %+v", s)
			}
			if err.Error() != tt.want {
				t.Errorf("Decode error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestDecodeReadsTheAmazonVPCCNICheckpoint(t *testing.T) {
	data, err := os.ReadFile("testdata/aws-node-ipam.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := State{Entries: []Entry{
		{
			Key:        ipam.Key{Network: "aws-cni", ContainerID: "1f2e3d4c5b6a79880716253443526170f9e8d7c6b5a49382716051f4e3d2c1b0", IfName: "eth0"},
			Addr:       netip.MustParseAddr("192.168.40.5"),
			Pod:        ipam.Pod{Namespace: "default", Name: "web-6b7f9c8d5-q4r7t"},
			AssignedAt: time.Date(2024, 5, 31, 16, 10, 0, 0, time.UTC),
		},
		{
			Key:        ipam.Key{Network: "aws-cni", ContainerID: "9d4b3c0e4a1f5e2b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", IfName: "eth0"},
			Addr:       netip.MustParseAddr("192.168.40.17"),
			Pod:        ipam.Pod{Namespace: "kube-system", Name: "coredns-5d78c9869d-8xk2p"},
			AssignedAt: time.Date(2024, 5, 31, 16, 8, 37, 123456789, time.UTC),
		},
		{
			// Backfilled by the Amazon VPC CNI from the container
			// runtime, with no time recorded.
			Key:  ipam.Key{Network: "_migrated-from-cri", ContainerID: "0a1b2c3d4e5f", IfName: "unknown"},
			Addr: netip.MustParseAddr("192.168.41.200"),
		},
	}}
	if !equal(got, want) {
		t.Errorf("Decode =\n%+v\nwant\n%+v", got, want)
	}
	if !got.Entries[2].AssignedAt.IsZero() {
		t.Errorf("a zero allocationTimestamp became %s, want the zero time", got.Entries[2].AssignedAt)
	}
}

func TestDecodeRefusesBadAmazonVPCCNIEntries(t *testing.T) {
	aws := func(entry string) string { return `{"version":"vpc-cni-ipam/1","allocations":[` + entry + `]}` }
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"both families", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv4":"10.0.0.1","ipv6":"2600:1f14::5","allocationTimestamp":1}`),
			`checkpoint: allocations[0]: both ipv4 "10.0.0.1" and ipv6 "2600:1f14::5": aws-node records one address per entry`},
		{"IPv4 as ipv6", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv6":"10.0.0.1"}`),
			`checkpoint: allocations[0]: ipv6 "10.0.0.1" is not an IPv6 address`},
		{"IPv6 as ipv4", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv4":"2600:1f14::5"}`),
			`checkpoint: allocations[0]: ipv4 "2600:1f14::5" is not an IPv4 address`},
		{"no address", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","allocationTimestamp":1}`),
			"checkpoint: allocations[0]: no ipv4 or ipv6 address"},
		{"bad address", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv4":"10.0.0.256"}`),
			`checkpoint: allocations[0]: ipv4 "10.0.0.256" is not an IPv4 address`},
		{"timestamp as a string", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv4":"10.0.0.1","allocationTimestamp":"1717171717"}`),
			`checkpoint: allocations[0]: "allocationTimestamp" is a JSON string, want a whole number`},
		{"timestamp with a fraction", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv4":"10.0.0.1","allocationTimestamp":1.5}`),
			`checkpoint: allocations[0]: "allocationTimestamp" is a JSON number 1.5, want a whole number`},
		{"no container id", aws(`{"networkName":"aws-cni","ifName":"eth0","ipv4":"10.0.0.1"}`),
			"checkpoint: allocations[0]: owner has no container id"},
		{"address held twice", aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv4":"10.0.0.1"},{"networkName":"aws-cni","containerID":"b","ifName":"eth0","ipv4":"10.0.0.1"}`),
			"checkpoint: address 10.0.0.1 is held by two owners: allocations[0] (aws-cni/a/eth0) and allocations[1] (aws-cni/b/eth0)"},
		{"allocations not a list", `{"version":"vpc-cni-ipam/1","allocations":"none"}`,
			`checkpoint: "allocations" is a JSON string, want a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("Decode accepted it: %+v", s)
			}
			if err.Error() != tt.want {
				t.Errorf("Decode error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestDecodeAcceptsAnEmptyAmazonVPCCNICheckpoint(t *testing.T) {
	for _, in := range []string{
		`{"version":"vpc-cni-ipam/1","allocations":[]}`,
		`{"version":"vpc-cni-ipam/1","allocations":null}`,
		`{"version":"vpc-cni-ipam/1"}`,
	} {
		s, err := Decode([]byte(in))
		if err != nil || len(s.Entries) != 0 {
			t.Errorf("Decode(%s) = %+v, %v; want an empty state", in, s, err)
		}
	}
}

func TestDecodeSortsByAddressAndNormalisesTimeToUTC(t *testing.T) {
	in := v1(`{"network":"n","containerID":"b","ifName":"eth0","address":"10.0.0.10","assignedAt":"2026-01-02T05:04:05+02:00"},` +
		`{"network":"n","containerID":"a","ifName":"eth0","address":"10.0.0.9","assignedAt":"2026-01-02T03:04:05.5Z"}`)
	s, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Entries) != 2 || s.Entries[0].Addr.String() != "10.0.0.9" || s.Entries[1].Addr.String() != "10.0.0.10" {
		t.Fatalf("Decode order = %+v, want 10.0.0.9 then 10.0.0.10", s.Entries)
	}
	if at := s.Entries[1].AssignedAt; at.Location() != time.UTC || !at.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("AssignedAt = %s, want 2026-01-02 03:04:05 UTC", at)
	}
}

// A time zone can carry a time written in year 0 or 9999 outside the years
// an RFC 3339 time can hold once Encode turns it to UTC. Decode used to
// accept it; the agent then failed to write its checkpoint back and exited
// at every start instead of keeping the file aside as corrupt.
func TestDecodeRefusesAnAssignedAtTimeEncodeCannotWrite(t *testing.T) {
	tests := []struct {
		name, at, want string
	}{
		{"year 0 east of UTC", "0000-01-01T00:00:00+01:00",
			`checkpoint: assignments[1]: assignedAt "0000-01-01T00:00:00+01:00" is in year -1 in UTC; a checkpoint holds years 0-9999`},
		{"year 9999 west of UTC", "9999-12-31T23:30:00-01:00",
			`checkpoint: assignments[1]: assignedAt "9999-12-31T23:30:00-01:00" is in year 10000 in UTC; a checkpoint holds years 0-9999`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := v1(good + `,{"network":"vpcnet","containerID":"b","ifName":"eth0","address":"10.0.0.6","assignedAt":"` + tt.at + `"}`)
			s, err := Decode([]byte(in))
			if err == nil {
				_, encErr := Encode(s)
				t.Fatalf("Decode accepted it (Encode then says: %v)", encErr)
			}
			if err.Error() != tt.want {
				t.Errorf("Decode error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestDecodeAcceptsTheEdgesOfTheYearsEncodeWrites(t *testing.T) {
	for _, at := range []string{"0000-01-01T00:00:00Z", "0000-01-01T01:00:00+01:00", "9999-12-31T23:59:59.999999999Z", "9999-12-31T22:59:59-01:00"} {
		s, err := Decode([]byte(v1(`{"network":"n","containerID":"a","ifName":"eth0","address":"10.0.0.5","assignedAt":"` + at + `"}`)))
		if err != nil {
			t.Errorf("Decode of assignedAt %s: %v", at, err)
			continue
		}
		if _, err := Encode(s); err != nil {
			t.Errorf("assignedAt %s decodes but does not encode: %v", at, err)
		}
	}
}

// TestEncodeAWSWritesWhatAWSNodeAndDecodeRead: the file vpcnet leaves for
// aws-node on a switch back carries the version aws-node requires, and
// reads back as the same state (times kept to the nanosecond, an unknown
// time as none, pods' names for aws-node's veth check).
func TestEncodeAWSWritesWhatAWSNodeAndDecodeRead(t *testing.T) {
	data, err := os.ReadFile("testdata/aws-node-ipam.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := EncodeAWS(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"version":"vpc-cni-ipam/1"`)) {
		t.Errorf("no aws-node version stamp in %s", out)
	}
	got, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(EncodeAWS) = %v\n%s", err, out)
	}
	if !equal(got, want) {
		t.Errorf("round trip =\n%+v\nwant\n%+v", got, want)
	}
	dup := State{Entries: append(slices.Clone(want.Entries), want.Entries[0])}
	if _, err := EncodeAWS(dup); err == nil {
		t.Error("EncodeAWS wrote one address twice")
	}
}

// aws-node's IPv6 mode records "ipv6" entries (writeBackingStoreUnsafe,
// v1.23): vpcnet imports them to switch such a node over, and writes them
// back the same way, so aws-node can take the node back.
func TestIPv6EntriesSwitchOverAndBackInAWSNodesFormat(t *testing.T) {
	aws := func(entry string) string { return `{"version":"vpc-cni-ipam/1","allocations":[` + entry + `]}` }
	in := aws(`{"networkName":"aws-cni","containerID":"a","ifName":"eth0","ipv6":"2600:1f14:abc:de01:12::","allocationTimestamp":1717171717123456789,"metadata":{"k8sPodNamespace":"default","k8sPodName":"web"}},` +
		`{"networkName":"aws-cni","containerID":"b","ifName":"eth0","ipv6":"2600:1f14:abc:de01:12::1","allocationTimestamp":0,"metadata":{}}`)
	s, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Key: ipam.Key{Network: "aws-cni", ContainerID: "a", IfName: "eth0"}, Addr: netip.MustParseAddr("2600:1f14:abc:de01:12::"),
			Pod: ipam.Pod{Namespace: "default", Name: "web"}, AssignedAt: time.Unix(0, 1717171717123456789).UTC()},
		{Key: ipam.Key{Network: "aws-cni", ContainerID: "b", IfName: "eth0"}, Addr: netip.MustParseAddr("2600:1f14:abc:de01:12::1")},
	}
	if !reflect.DeepEqual(s.Entries, want) {
		t.Fatalf("Decode =\n%+v\nwant\n%+v", s.Entries, want)
	}
	out, err := EncodeAWS(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"ipv6":"2600:1f14:abc:de01:12::1"`)) || bytes.Contains(out, []byte(`"ipv4"`)) {
		t.Errorf("EncodeAWS wrote %s, want ipv6 fields and no ipv4 one, as aws-node does", out)
	}
	back, err := Decode(out)
	if err != nil || !equal(back, s) {
		t.Errorf("Decode(EncodeAWS) = %+v, %v, want %+v", back, err, s)
	}
	ours, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Decode(ours); err != nil || !equal(again, s) {
		t.Errorf("vpcnet's own format round trip = %+v, %v", again, err)
	}
}
