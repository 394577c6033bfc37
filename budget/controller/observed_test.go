package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock returns rec from Get.
type fakeLock struct {
	resourcelock.Interface
	rec resourcelock.LeaderElectionRecord
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := f.rec
	return &r, nil, nil
}

// A new term takes the buckets as empty when the last leader's grants
// ended at the latest, counted from when this replica first read the
// last renewal (fresh + horizon + callSlack after it), not from a fixed
// credit before its own start: the standby's retry jitter between the
// Lease's expiry and its takeover (up to 4.4 s with the defaults) is
// refill the term counts (scale's failover: 75 -> 56 pods of 9,000 past
// the takeover plus one attach at 300 nodes). After a release the
// Lease is taken over at once, and the buckets are empty only once the
// last leader's grants can have ended, ahead of the term's start.
func TestANewTermCountsTheRefillFromTheLastRenewalItSaw(t *testing.T) {
	s := Settings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	_, _, credit := s.Horizon()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	f := &fakeLock{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "a", RenewTime: metav1.NewTime(t0)}}
	lock := &observedLock{Interface: f, now: func() time.Time { return now }}
	read := func(at time.Duration) {
		now = t0.Add(at)
		if _, _, err := lock.Get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	read(time.Second)
	f.rec.RenewTime = metav1.NewTime(t0.Add(2 * time.Second)) // the leader's last renewal
	read(3 * time.Second)
	read(5 * time.Second)
	read(18 * time.Second) // the same record: the Lease expires at 18 s
	seen, released := lock.lastRenewalSeen()
	if !seen.Equal(t0.Add(3*time.Second)) || released {
		t.Fatalf("last renewal first read at %v (released %v); want 3s, held", seen.Sub(t0), released)
	}
	// The takeover at 20.4 s (the retry after the expiry): the last
	// grants ended by 3 + 8 s.
	after := s.LeaseDuration - credit
	off := termOffset(t0.Add(20400*time.Millisecond), seen, after, credit)
	if want := -9400 * time.Millisecond; off != want {
		t.Errorf("a crash's takeover at 20.4s takes the buckets as empty %v from its start; want %v (credit alone: %v)", off, want, -credit)
	}
	// A release, read at 21 s and taken over at once: the last grants
	// ended by 21 + horizon + a second.
	f.rec = resourcelock.LeaderElectionRecord{RenewTime: metav1.NewTime(t0.Add(21 * time.Second))}
	read(21 * time.Second)
	seen, released = lock.lastRenewalSeen()
	if !seen.Equal(t0.Add(21*time.Second)) || !released {
		t.Fatalf("the release first read at %v (released %v); want 21s, released", seen.Sub(t0), released)
	}
	horizon, fresh, _ := s.Horizon()
	if off := termOffset(t0.Add(22*time.Second), seen, after-fresh, credit); off != horizon {
		t.Errorf("a takeover 1 s after a release seen takes the buckets as empty %v from its start; want %v, when the last grants can have ended", off, horizon)
	}
	if off := termOffset(t0, time.Time{}, after, credit); off != -credit {
		t.Errorf("a first term: %v; want %v", off, -credit)
	}
}
