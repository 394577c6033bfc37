package checkpoint

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

func key(ctr string) ipam.Key { return ipam.Key{Network: "vpcnet", ContainerID: ctr, IfName: "eth0"} }

func entryAt(ctr, addr string, at time.Time) Entry {
	return Entry{
		Key:        key(ctr),
		Addr:       netip.MustParseAddr(addr),
		Pod:        ipam.Pod{Namespace: "default", Name: "pod-" + ctr},
		AssignedAt: at,
	}
}

// equal compares states the way a reader of the checkpoint would: same
// entries and releases in the same order, times equal as instants.
func equal(a, b State) bool {
	if len(a.Entries) != len(b.Entries) || len(a.Released) != len(b.Released) || a.ReleasesKnown != b.ReleasesKnown {
		return false
	}
	for i := range a.Released {
		if a.Released[i].Addr != b.Released[i].Addr || !a.Released[i].At.Equal(b.Released[i].At) {
			return false
		}
	}
	for i := range a.Entries {
		x, y := a.Entries[i], b.Entries[i]
		if x.Key != y.Key || x.Addr != y.Addr || x.Pod != y.Pod || !x.AssignedAt.Equal(y.AssignedAt) || !x.UnroutedSince.Equal(y.UnroutedSince) {
			return false
		}
	}
	return true
}

// manyEntries returns n distinct assignments, as a busy node would hold.
func manyEntries(n int) State {
	base := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	var s State
	for i := range n {
		addr := netip.AddrFrom4([4]byte{10, 1, byte(i / 200), byte(1 + i%200)})
		s.Entries = append(s.Entries, Entry{
			Key:        ipam.Key{Network: "vpcnet", ContainerID: fmt.Sprintf("%064x", i), IfName: "eth0"},
			Addr:       addr,
			Pod:        ipam.Pod{Namespace: "team-" + fmt.Sprint(i%7), Name: fmt.Sprintf("web-%d-7d9f8c6b5-x2k4q", i)},
			AssignedAt: base.Add(time.Duration(i) * time.Second),
		})
	}
	return s
}

func TestEncodeThenDecodeGivesTheSameState(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		in   State
	}{
		{"empty", State{}},
		{"one", State{Entries: []Entry{entryAt("a", "10.0.0.5", at)}}},
		{"no pod name", State{Entries: []Entry{{Key: key("a"), Addr: netip.MustParseAddr("10.0.0.5"), AssignedAt: at}}}},
		{"unknown time", State{Entries: []Entry{entryAt("a", "10.0.0.5", time.Time{})}}},
		{"unrouted", State{Entries: []Entry{{Key: key("a"), Addr: netip.MustParseAddr("10.0.0.5"), AssignedAt: at, UnroutedSince: at.Add(time.Minute)}}}},
		{"odd characters", State{Entries: []Entry{{
			Key:  ipam.Key{Network: `n"e\t`, ContainerID: "<ctr>&", IfName: "eth0"},
			Addr: netip.MustParseAddr("192.168.1.1"), Pod: ipam.Pod{Namespace: "ns", Name: "ünïcode"}, AssignedAt: at,
		}}}},
		{"many", manyEntries(250)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Encode(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode(Encode(state)): %v\n%s", err, data)
			}
			if !equal(got, tt.in) {
				t.Errorf("round trip changed the state:\n got %+v\nwant %+v", got, tt.in)
			}
		})
	}
}

func TestEncodeSortsByAddressOnePerLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := State{Entries: []Entry{
		entryAt("c", "10.0.0.30", at),
		entryAt("a", "10.0.0.4", at),
		entryAt("b", "10.0.0.200", at),
	}}
	data, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"vpcnet/1","assignments":[
{"network":"vpcnet","containerID":"a","ifName":"eth0","address":"10.0.0.4","podNamespace":"default","podName":"pod-a","assignedAt":"2026-01-02T03:04:05Z"},
{"network":"vpcnet","containerID":"c","ifName":"eth0","address":"10.0.0.30","podNamespace":"default","podName":"pod-c","assignedAt":"2026-01-02T03:04:05Z"},
{"network":"vpcnet","containerID":"b","ifName":"eth0","address":"10.0.0.200","podNamespace":"default","podName":"pod-b","assignedAt":"2026-01-02T03:04:05Z"}
]}
`
	if string(data) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", data, want)
	}
	if s.Entries[0].Key.ContainerID != "c" {
		t.Error("Encode reordered the caller's entries")
	}
}

func TestEncodeRefusesWhatDecodeWouldRefuse(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"no container id", []Entry{{Key: ipam.Key{Network: "n", IfName: "eth0"}, Addr: netip.MustParseAddr("10.0.0.1")}},
			"checkpoint: encode Entries[0]: owner has no container id"},
		{"no address", []Entry{{Key: key("a")}},
			"checkpoint: encode Entries[0]: no address"},
		{"IPv4 in IPv6", []Entry{entryAt("a", "::ffff:10.0.0.1", at)},
			`checkpoint: encode Entries[0]: address "::ffff:10.0.0.1" is not an IPv4 or IPv6 address`},
		{"zoned IPv6", []Entry{entryAt("a", "fd00::1%eth0", at)},
			`checkpoint: encode Entries[0]: address "fd00::1%eth0" is not an IPv4 or IPv6 address`},
		{"IPv6 link-local", []Entry{entryAt("a", "fe80::1", at)},
			"checkpoint: encode Entries[0]: address fe80::1 is not a unicast address a pod can hold"},
		{"loopback", []Entry{entryAt("a", "127.0.0.1", at)},
			"checkpoint: encode Entries[0]: address 127.0.0.1 is not a unicast address a pod can hold"},
		{"time out of range", []Entry{entryAt("a", "10.0.0.1", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))},
			"checkpoint: encode Entries[0]: assigned-at time 10000-01-01 00:00:00 +0000 UTC is outside years 0-9999"},
		{"owner twice", []Entry{entryAt("a", "10.0.0.1", at), entryAt("a", "10.0.0.2", at)},
			"checkpoint: encode: Entries[0] and Entries[1] both record owner vpcnet/a/eth0 (addresses 10.0.0.1 and 10.0.0.2); an owner holds one address"},
		{"address twice", []Entry{entryAt("a", "10.0.0.1", at), entryAt("b", "10.0.0.1", at)},
			"checkpoint: encode: address 10.0.0.1 is held by two owners: Entries[0] (vpcnet/a/eth0) and Entries[1] (vpcnet/b/eth0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Encode(State{Entries: tt.entries})
			if err == nil {
				t.Fatalf("Encode accepted it:\n%s", data)
			}
			if err.Error() != tt.want {
				t.Errorf("Encode error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestEncodeWritesTimesInUTC(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -7*3600))
	data, err := Encode(State{Entries: []Entry{entryAt("a", "10.0.0.1", at)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"assignedAt":"2026-01-02T10:04:05Z"`) {
		t.Errorf("time not written in UTC:\n%s", data)
	}
}

func BenchmarkEncode250(b *testing.B) {
	s := manyEntries(250)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode250(b *testing.B) {
	data, err := Encode(manyEntries(250))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
