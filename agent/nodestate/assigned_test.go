package nodestate

import (
	"errors"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

// An Add's address is announced while the checkpoint that records it is
// written, so the shell can write the pod's rules meanwhile; the answer
// still waits for the disk, and a failed write still fails it.
func TestAnAddsAddressIsAnnouncedWhileItsCheckpointIsWrittenAndAnsweredAfter(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	k := ipam.Key{Network: "n", ContainerID: "a", IfName: "eth0"}

	n.Step(t0, AddRequest{ID: 1, Key: k})
	rd := n.Ready()
	if rd.Persist == nil || len(rd.Replies) != 0 {
		t.Fatalf("after an Add: persist %v, replies %+v; want a write and no answer before it is on disk", rd.Persist != nil, rd.Replies)
	}
	if len(rd.Assigned) != 1 || rd.Assigned[0].ID != 1 || !rd.Assigned[0].Assignment.Addr.IsValid() {
		t.Fatalf("assigned = %+v; want the Add's address announced while its checkpoint is written", rd.Assigned)
	}
	addr := rd.Assigned[0].Assignment.Addr
	n.Step(t0, Persisted{Version: rd.Persist.Version})
	rd = n.Ready()
	if len(rd.Replies) != 1 || rd.Replies[0].Err != nil || rd.Replies[0].Assignment.Addr != addr || len(rd.Assigned) != 0 {
		t.Fatalf("after the write: replies %+v, assigned %+v; want the announced address answered, announced once", rd.Replies, rd.Assigned)
	}

	// Repeated once durable: answered at once, nothing to announce.
	n.Step(t0, AddRequest{ID: 2, Key: k})
	rd = n.Ready()
	if len(rd.Replies) != 1 || !rd.Replies[0].Existing || len(rd.Assigned) != 0 {
		t.Fatalf("a repeated Add: replies %+v, assigned %+v; want the existing address answered at once", rd.Replies, rd.Assigned)
	}

	// A write that fails takes the announced address back.
	k2 := ipam.Key{Network: "n", ContainerID: "b", IfName: "eth0"}
	n.Step(t0, AddRequest{ID: 3, Key: k2})
	rd = n.Ready()
	if len(rd.Assigned) != 1 || rd.Persist == nil {
		t.Fatalf("second Add: assigned %+v, persist %v", rd.Assigned, rd.Persist != nil)
	}
	n.Step(t0, Persisted{Version: rd.Persist.Version, Err: errors.New("disk full")})
	rd = n.Ready()
	if len(rd.Replies) != 1 || rd.Replies[0].Err == nil {
		t.Fatalf("after a failed write: replies %+v; want the announced Add failed", rd.Replies)
	}
	if _, _, held := n.Lookup(k2); held {
		t.Fatal("the address of an Add whose write failed is still held for it")
	}
}
