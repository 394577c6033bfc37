package checkpoint

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Issue 25: release times are in the checkpoint, so after a restart an
// address cools only for what is left of its own cooldown.
func TestReleaseTimesSurviveEncodeAndDecode(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := State{
		Entries:       []Entry{entryAt("a", "10.0.0.5", at)},
		Released:      []Release{{Addr: netip.MustParseAddr("10.0.0.9"), At: at.Add(time.Second)}, {Addr: netip.MustParseAddr("10.0.0.7"), At: at}},
		ReleasesKnown: true,
	}
	data, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !got.ReleasesKnown || len(got.Released) != 2 || got.Released[0].Addr != netip.MustParseAddr("10.0.0.7") || !got.Released[1].At.Equal(at.Add(time.Second)) {
		t.Fatalf("decoded %+v from\n%s", got, data)
	}
	// Known and empty is not unknown: nothing was released lately.
	data, err = Encode(State{ReleasesKnown: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Decode(data); err != nil || !got.ReleasesKnown {
		t.Fatalf("empty known releases decoded as %+v, %v from\n%s", got, err, data)
	}
}

// A checkpoint written before release times were recorded, and the Amazon
// VPC CNI's, do not say when free addresses were released.
func TestOlderCheckpointsDoNotKnowReleaseTimes(t *testing.T) {
	for _, in := range []string{v1(good), `{"version":"vpc-cni-ipam/1","allocations":[]}`} {
		s, err := Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if s.ReleasesKnown {
			t.Errorf("%s: release times known", in)
		}
		data, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "released") {
			t.Errorf("unknown release times written as known:\n%s", data)
		}
	}
}

func TestDecodeRefusesBadReleases(t *testing.T) {
	doc := func(rel string) string { return v1(good)[:len(v1(good))-1] + `,"released":[` + rel + `]}` }
	for _, tt := range []struct{ name, in, want string }{
		{"released twice", doc(`{"address":"10.0.0.9","releasedAt":"2026-01-02T03:04:05Z"},{"address":"10.0.0.9","releasedAt":"2026-01-02T03:04:06Z"}`),
			"checkpoint: address 10.0.0.9 is released twice: released[0] and released[1]"},
		{"released and held", doc(`{"address":"10.0.0.5","releasedAt":"2026-01-02T03:04:05Z"}`),
			"checkpoint: address 10.0.0.5 is both released (released[0]) and held by an assignment"},
		{"no time", doc(`{"address":"10.0.0.9"}`), "checkpoint: released[0]: no releasedAt time"},
		{"bad address", doc(`{"address":"::ffff:10.0.0.9","releasedAt":"2026-01-02T03:04:05Z"}`), `checkpoint: released[0]: address "::ffff:10.0.0.9" is not an IPv4 or IPv6 address`},
		{"loopback", doc(`{"address":"::1","releasedAt":"2026-01-02T03:04:05Z"}`), `checkpoint: released[0]: address ::1 is not a unicast address a pod can hold`},
		{"unknown field", doc(`{"address":"10.0.0.9","releasedAt":"2026-01-02T03:04:05Z","by":"x"}`), `checkpoint: released[0]: unknown field "by"`},
	} {
		_, err := Decode([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
		}
	}
}
