package checkpoint

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzDecode checks that Decode never panics, that every error says it is
// about the checkpoint, and that anything Decode accepts survives Encode
// and Decode unchanged, so the agent never rewrites a state it read into
// one it cannot read back. Run it with
//
//	go test ./checkpoint -run '^$' -fuzz FuzzDecode -fuzztime 3m
func FuzzDecode(f *testing.F) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, s := range []State{{}, {Entries: []Entry{entryAt("a", "10.0.0.5", at)}}, manyEntries(3)} {
		data, err := Encode(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	aws, err := os.ReadFile("testdata/aws-node-ipam.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(aws)
	f.Add([]byte(v1(good)))
	f.Add([]byte(`{"version":"vpc-cni-ipam/1","allocations":[{"networkName":"n","containerID":"c","ifName":"i","ipv4":"10.0.0.1","allocationTimestamp":-1}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "checkpoint: ") {
				t.Fatalf("error does not say it is about the checkpoint: %v", err)
			}
			return
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("Decode accepted a state Encode refuses: %v\ninput: %q", err, data)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode refuses what Encode wrote: %v\nencoded: %s", err, enc)
		}
		if !equal(s, again) {
			t.Fatalf("round trip changed the state:\nfirst  %+v\nsecond %+v", s, again)
		}
		if enc2, _ := Encode(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("Encode is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzEntryRoundTrip builds one vpcnet/1 entry from fuzzed fields, so the
// fuzzer works on values (times with odd zones, addresses, names) rather
// than on JSON syntax, and checks the codec's promise: whatever Decode
// accepts, Encode writes, and Decode reads back equal.
func FuzzEntryRoundTrip(f *testing.F) {
	f.Add("vpcnet", "0123456789abcdef", "eth0", "10.0.0.5", "default", "web-0", "2026-01-02T03:04:05.123456789Z")
	f.Add("n", "c", "i", "100.64.0.1", "", "", "0000-01-01T00:00:00+01:00")
	f.Add("n", "c", "i", "192.168.1.1", "kube-system", "x", "9999-12-31T23:30:00-01:00")
	f.Add("n\xff", "c\u2028", "eth0", "10.0.0.1", "\xed\xa0\x80", "p", "2026-01-02T03:04:05+14:00")
	f.Fuzz(func(t *testing.T, network, containerID, ifName, addr, ns, name, at string) {
		line, err := json.Marshal(entry{Network: network, ContainerID: containerID, IfName: ifName,
			Address: addr, PodNamespace: ns, PodName: name, AssignedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		data := []byte(v1(string(line)))
		s, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("Decode accepted an entry Encode refuses: %v\ninput: %s", err, data)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode refuses what Encode wrote: %v\nencoded: %s", err, enc)
		}
		if !equal(s, again) {
			t.Fatalf("round trip changed the state:\nfirst  %+v\nsecond %+v", s, again)
		}
	})
}
