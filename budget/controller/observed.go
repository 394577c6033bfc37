package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// observedLock is the Lease lock, remembering when this replica first
// read the record it read last: the renewal that record holds was made
// before then, so the leader that made it granted nothing after
// then + fresh + horizon + callSlack (Settings.Horizon). A standby takes
// the Lease over only after it read the same record for a lease
// duration, and client-go's update replaces exactly that record; its
// next jittered retry (2 to 4.4 s with the defaults) comes between, and
// a new term that counted its refill from a fixed credit before its own
// start lost that much.
type observedLock struct {
	resourcelock.Interface
	now func() time.Time

	// mu guards the fields below.
	mu     sync.Mutex
	holder string
	renew  time.Time
	// at is when the record (holder, renew) was first read; zero before
	// any was.
	at time.Time
}

func (o *observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := o.Interface.Get(ctx)
	if err == nil && r != nil {
		o.seen(r.HolderIdentity, r.RenewTime.Time)
	}
	return r, raw, err
}

func (o *observedLock) seen(holder string, renew time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.at.IsZero() || holder != o.holder || !renew.Equal(o.renew) {
		o.holder, o.renew, o.at = holder, renew, o.now()
	}
}

// lastRenewalSeen is when this replica first read the record it read
// last, zero if it read none (the Lease did not exist); released says
// that record names no holder: its leader released the Lease (client-go
// writes an empty holder), having stopped granting first (Run).
func (o *observedLock) lastRenewalSeen() (at time.Time, released bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at, o.holder == ""
}

// termOffset is where a new term takes the buckets as empty, from now
// (budgetapi.Server.StartTerm): when the grants of the last leader ended
// at the latest, after (fresh + horizon + callSlack) after the last
// renewal this replica saw was first read (seen). After a crash the term
// starts a lease duration or more after seen, so this is the Lease's
// credit or more before it; after a release (the Lease handed over at
// once) it may lie ahead. With no record seen (the Lease was just
// created) there was no leader before: credit before now.
func termOffset(now, seen time.Time, after, credit time.Duration) time.Duration {
	if seen.IsZero() {
		return -credit
	}
	return seen.Add(after).Sub(now)
}
