package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/vpcnet/vpcnet/budget"
)

// BookedAnnotation, on the controller's Lease, is how far its leader had
// booked each EC2 action when it last renewed the Lease, as JSON: action
// name to RFC 3339 time. A join books tickets minutes ahead; the next
// leader reads it to grant those tickets in their places, when their
// holders come back with them, and to book requests asked after them
// after them (budget.Ledger.StartTerm). Operators read it with kubectl
// to see how far the cluster's EC2 calls are booked.
const BookedAnnotation = "budget.vpcnet.io/booked"

// LastTicketAnnotation, on the controller's Lease, is the number of the
// last ticket its leader had handed out when it last renewed the Lease,
// in decimal: a ticket numbered above it was booked after the schedule
// BookedAnnotation gives, and the next leader, which may have booked its
// slot again, places it by its age instead (budget.Term.LastTicket).
const LastTicketAnnotation = "budget.vpcnet.io/last-ticket"

// bookedLeases carries BookedAnnotation and LastTicketAnnotation through
// client-go's LeaseLock, which writes only the Lease's spec: every update
// of the Lease writes the schedule booked (the leader's, and what the
// Lease said before, per action the later: a leader writes the promise
// it took over with its first renewal, before its own schedule has any
// of it) and the leader's last ticket, and every read remembers what the
// Lease said.
type bookedLeases struct {
	coordinationv1client.LeasesGetter
	// promise is this replica's schedule now.
	promise func() budget.Promise
	log     *slog.Logger

	// mu guards read.
	mu sync.Mutex
	// read is what the Lease said when this replica last read it.
	read budget.Promise
}

// lastRead is the promise the Lease carried when this replica last read
// it: its previous leader's.
func (b *bookedLeases) lastRead() budget.Promise {
	b.mu.Lock()
	defer b.mu.Unlock()
	return budget.Promise{Booked: maps.Clone(b.read.Booked), LastTicket: b.read.LastTicket}
}

func (b *bookedLeases) Leases(namespace string) coordinationv1client.LeaseInterface {
	return bookedLeaseClient{LeaseInterface: b.LeasesGetter.Leases(namespace), b: b}
}

type bookedLeaseClient struct {
	coordinationv1client.LeaseInterface
	b *bookedLeases
}

func (c bookedLeaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	l, err := c.LeaseInterface.Get(ctx, name, opts)
	if err == nil {
		c.b.remember(l)
	}
	return l, err
}

func (c bookedLeaseClient) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	c.b.annotate(l)
	return c.LeaseInterface.Update(ctx, l, opts)
}

// remember keeps what l's annotation says; one that does not parse (a
// hand edit) is logged and taken as no promise: the next term books as
// if the last leader had booked nothing ahead, which costs order, not
// refusals.
func (b *bookedLeases) remember(l *coordinationv1.Lease) {
	var read map[string]time.Time
	if v, ok := l.Annotations[BookedAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &read); err != nil {
			b.log.Warn("ignoring the Lease's booked schedule, so a next leader books as if nothing was booked ahead: the annotation is not JSON of EC2 action to RFC 3339 time (a hand edit?); the leader writes it whole at its next renewal",
				"annotation", BookedAnnotation, "err", err)
			read = nil
		}
	}
	var last uint64
	if v, ok := l.Annotations[LastTicketAnnotation]; ok {
		var err error
		if last, err = strconv.ParseUint(v, 10, 64); err != nil {
			b.log.Warn("ignoring the Lease's last ticket, so a next leader grants every ticket of the last one at its slot: the annotation is not a decimal number (a hand edit?); the leader writes it at its next renewal",
				"annotation", LastTicketAnnotation, "err", err)
			last = 0
		}
	}
	b.mu.Lock()
	b.read = budget.Promise{Booked: read, LastTicket: last}
	b.mu.Unlock()
}

// annotate writes the schedule booked and the last ticket into l, the
// Lease about to be written.
func (b *bookedLeases) annotate(l *coordinationv1.Lease) {
	p := budget.Renewal(b.lastRead(), b.promise())
	v, err := json.Marshal(p.Booked)
	if err != nil {
		return // a map of times always marshals
	}
	l.Annotations = maps.Clone(l.Annotations)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[BookedAnnotation] = string(v)
	l.Annotations[LastTicketAnnotation] = strconv.FormatUint(p.LastTicket, 10)
}
