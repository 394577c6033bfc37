package checkpoint

import (
	"bytes"
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
