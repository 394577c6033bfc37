package agent

import (
	"errors"
	"testing"

	"github.com/vpcnet/vpcnet/agent/nodestate"
)

// An Add that listens hears its address announced, then its reply; a
// request that does not listen (Submit's, a Del's) hears only its reply,
// and announcing to it never blocks the owner.
func TestAnAnnouncedAddressReachesOnlyARequestThatListensAndNeverBlocksTheOwner(t *testing.T) {
	var rs replies
	add, addReply, addAssigned := rs.openAdd()
	del, delReply := rs.open()

	rs.announce(nodestate.Reply{ID: add})
	rs.announce(nodestate.Reply{ID: del}) // must not block: nothing listens
	select {
	case r := <-addAssigned:
		if r.ID != add {
			t.Fatalf("announced %d to the Add %d", r.ID, add)
		}
	default:
		t.Fatal("the Add's address was not announced to it")
	}
	select {
	case r := <-addReply:
		t.Fatalf("an announcement reached the Add as its reply: %+v", r)
	default:
	}

	rs.deliver(nodestate.Reply{ID: add})
	rs.deliver(nodestate.Reply{ID: del})
	if r := <-addReply; r.ID != add {
		t.Fatalf("the Add's reply is %d, want %d", r.ID, add)
	}
	if r := <-delReply; r.ID != del {
		t.Fatalf("the Del's reply is %d, want %d", r.ID, del)
	}

	// Answered, the Add is gone: a late announcement goes nowhere.
	rs.announce(nodestate.Reply{ID: add})
	select {
	case r := <-addAssigned:
		t.Fatalf("an answered Add heard an announcement: %+v", r)
	default:
	}
}

// A stopping agent answers an Add that was announced, so its request
// never waits for a reply that will not come.
func TestAStoppingAgentAnswersAnAnnouncedAdd(t *testing.T) {
	var rs replies
	id, reply, assigned := rs.openAdd()
	rs.announce(nodestate.Reply{ID: id})
	<-assigned
	rs.failAll(errStopped)
	if r := <-reply; !errors.Is(r.Err, errStopped) {
		t.Fatalf("reply after the stop = %+v, want errStopped", r)
	}
}
