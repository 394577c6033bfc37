package controller

import (
	"io"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/vpcnet/vpcnet/budget"
)

// The next leader learns from the Lease how far the last one had booked
// and which tickets it had handed out by then: a ticket numbered above
// was booked after, and is placed by age (budget.Term.LastTicket).
func TestTheLeaseCarriesTheLeadersPromiseToTheNext(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	at := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	leader := &bookedLeases{log: log, promise: func() budget.Promise {
		return budget.Promise{Booked: map[string]time.Time{"CreateNetworkInterface": at}, LastTicket: 1767225600000000042}
	}}
	l := &coordinationv1.Lease{}
	leader.annotate(l)
	standby := &bookedLeases{log: log}
	standby.remember(l)
	got := standby.lastRead()
	if !got.Booked["CreateNetworkInterface"].Equal(at) || got.LastTicket != 1767225600000000042 {
		t.Fatalf("the standby read %+v from the Lease's annotations %v; want creates booked until %v and last ticket 1767225600000000042", got, l.Annotations, at)
	}
	// A hand edit that does not parse is no promise of tickets: every
	// ticket of the last leader is granted at its slot, as before.
	l.Annotations[LastTicketAnnotation] = "forty-two"
	standby.remember(l)
	if got := standby.lastRead(); got.LastTicket != 0 || !got.Booked["CreateNetworkInterface"].Equal(at) {
		t.Fatalf("after a hand edit of %s the standby read %+v; want no last ticket and the schedule kept", LastTicketAnnotation, got)
	}
}
