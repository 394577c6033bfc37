package budgetapi

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/clock"
)

// A controller that answered and then stops is failing over: the job
// waits for the next leader, asking every ElectionPause, and goes when it
// grants. Without an answer for DefaultFailoverHold the job goes alone,
// and so do the next ones at once, until a controller answers again.
// Before, the first failure sent every node of a join alone, a storm of
// RequestLimitExceeded (BENCHMARKS.md, the failover scenario).
func TestAFailoverHoldsJobsForTheNextLeader(t *testing.T) {
	f := &fakeController{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	clk := clock.NewManual(t0)
	var mu sync.Mutex // guards lookups and outcomes
	lookups := 0
	var outcomes []string
	c := NewClient(ClientOptions{Node: "n1", Clock: clk,
		Endpoint: func(context.Context) (string, error) {
			mu.Lock()
			lookups++
			mu.Unlock()
			return strings.TrimPrefix(hs.URL, "http://"), nil
		},
		Observe: func(o string, _ time.Duration) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() }})
	never := func() Need { return Need{} }
	acquire := func() <-chan error {
		done := make(chan error, 1)
		go func() { done <- c.Acquire(context.Background(), []string{"AttachNetworkInterface"}, never) }()
		return done
	}
	armed := func(at time.Time) func() bool {
		return func() bool { due, ok := clk.NextDue(); return ok && due.Equal(at) }
	}
	broken := func(b bool) { f.mu.Lock(); f.fail = b; f.mu.Unlock() }
	if err := <-acquire(); err != nil {
		t.Fatal(err)
	}

	broken(true) // the leader died
	done := acquire()
	waitFor(t, armed(t0.Add(ElectionPause)))
	clk.Advance(ElectionPause)
	waitFor(t, armed(t0.Add(2*ElectionPause)))
	select {
	case <-done:
		t.Fatal("the job went while the controller failed over; want it held for the next leader")
	default:
	}
	broken(false) // the standby took over
	clk.Advance(ElectionPause)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if lookups != 3 || !slices.Equal(outcomes, []string{Granted, Granted}) {
		t.Errorf("%d lookups, outcomes %v; want the Lease read again at both asks after the failure, and both jobs granted", lookups, outcomes)
	}
	mu.Unlock()
	// The next leader books what was held through its takeover in the
	// order it was first asked (budget.Term.Gather): the job says how
	// long it was held, under a number of its own.
	f.mu.Lock()
	first, held := f.asks[0], f.asks[len(f.asks)-1]
	f.mu.Unlock()
	if held.AgeMs != (2*ElectionPause).Milliseconds() || first.AgeMs != 0 || held.Ask == 0 || held.Ask == first.Ask {
		t.Errorf("the held job asked with ask %d, held %d ms (the job before: ask %d, held %d ms); want a new number, held %v, and the job before not held",
			held.Ask, held.AgeMs, first.Ask, first.AgeMs, 2*ElectionPause)
	}

	broken(true) // and no leader comes
	start := clk.Now()
	done = acquire()
	for clk.Now().Sub(start) < DefaultFailoverHold {
		waitFor(t, func() bool { _, ok := clk.NextDue(); return ok })
		due, _ := clk.NextDue()
		clk.Advance(due.Sub(clk.Now()))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-acquire(); err != nil { // alone at once: the hold is spent
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{Granted, Granted, Alone, Alone}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %v; want %v", outcomes, want)
	}
	if held := clk.Now().Sub(start); held != DefaultFailoverHold {
		t.Errorf("held %v with no leader; want %v", held, DefaultFailoverHold)
	}
}

// A request deferred with a ticket comes back with it and with its slot,
// as time from then: its slot is booked beyond the controller's horizon,
// and whichever leader answers next grants it there. A controller that
// sent no slot (before SlotMs) gets the ticket alone.
func TestADeferredTicketIsSentBackWithItsSlot(t *testing.T) {
	for _, tc := range []struct {
		slot time.Duration
		want *int64
	}{
		{2500 * time.Millisecond, ptr(int64(1500))},
		{0, nil},
	} {
		f := &fakeController{answers: []budget.Grant{{Deferred: time.Second, Ticket: 7, Slot: tc.slot}, {Wait: time.Millisecond}}}
		hs := httptest.NewServer(f)
		defer hs.Close()
		clk := clock.NewManual(t0)
		c := NewClient(ClientOptions{Node: "n1", Clock: clk,
			Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil }})
		done := make(chan error, 1)
		go func() {
			done <- c.Acquire(context.Background(), []string{"CreateNetworkInterface"}, func() Need { return Need{Urgent: true} })
		}()
		for _, at := range []time.Duration{time.Second, time.Second + time.Millisecond} {
			waitFor(t, func() bool { due, ok := clk.NextDue(); return ok && due.Equal(t0.Add(at)) })
			clk.Advance(t0.Add(at).Sub(clk.Now()))
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		asks := f.recorded()
		if len(asks) != 2 || asks[0].Ticket != 0 || asks[0].SlotMs != nil || asks[1].Ticket != 7 {
			t.Fatalf("slot %v: asks %+v; want the second to bring back ticket 7", tc.slot, asks)
		}
		if got := asks[1].SlotMs; (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("slot %v: the ticket came back with slotMs %v; want %v", tc.slot, deref(got), deref(tc.want))
		}
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// A controller that answers and refuses (403: the token) is no failover:
// the job goes alone at once rather than waiting for a leader that would
// refuse it too.
func TestARefusalIsNoFailover(t *testing.T) {
	f := &fakeController{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	clk := clock.NewManual(t0)
	var outcomes []string
	c := NewClient(ClientOptions{Node: "n1", Clock: clk,
		Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil },
		Observe:  func(o string, _ time.Duration) { outcomes = append(outcomes, o) }})
	never := func() Need { return Need{} }
	if err := c.Acquire(context.Background(), []string{"CreateNetworkInterface"}, never); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.refuse = true
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- c.Acquire(context.Background(), []string{"CreateNetworkInterface"}, never) }()
	var err error
	waitFor(t, func() bool {
		select {
		case err = <-done:
			return true
		default:
		}
		if _, held := clk.NextDue(); held {
			t.Fatal("the refused job is held for a next leader; want it alone at once")
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{Granted, Alone}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %v; want %v", outcomes, want)
	}
}

// A driver that cannot wait (agent/simulation plays a schedule on one
// thread, and the client's waits run on its clock) asks for no hold: a
// controller that stops sends the job alone at once, as before the hold.
// With the default hold every seed of the simulation with a failover hung.
func TestANegativeFailoverHoldSendsTheJobAloneAtOnce(t *testing.T) {
	f := &fakeController{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	c := NewClient(ClientOptions{Node: "n1", Clock: clock.NewManual(t0), FailoverHold: -1,
		Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil }})
	never := func() Need { return Need{} }
	if err := c.Acquire(context.Background(), []string{"AttachNetworkInterface"}, never); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.fail = true // the leader died
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- c.Acquire(context.Background(), []string{"AttachNetworkInterface"}, never) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job waits on the clock for a next leader; with no hold it goes alone at once")
	}
	if st := c.Status(); st.Alone != 1 {
		t.Errorf("status %+v; want the second job gone alone", st)
	}
}

// The client says when it starts and stops holding jobs for the next
// leader (HoldChanges, Status().Holding): the agent lets waiting ADDs
// wait the failover out instead of failing them just before their
// addresses come, which cost each such pod kubelet's backoff on top
// (scale's failover scenario).
func TestAHoldIsSignalledWhenItStartsAndEnds(t *testing.T) {
	f := &fakeController{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	clk := clock.NewManual(t0)
	c := NewClient(ClientOptions{Node: "n1", Clock: clk,
		Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil }})
	never := func() Need { return Need{} }
	acquire := func() <-chan error {
		done := make(chan error, 1)
		go func() { done <- c.Acquire(context.Background(), []string{"AttachNetworkInterface"}, never) }()
		return done
	}
	signalled := func() bool {
		select {
		case <-c.HoldChanges():
			return true
		default:
			return false
		}
	}
	if err := <-acquire(); err != nil {
		t.Fatal(err)
	}
	if signalled() || c.Status().Holding {
		t.Fatal("a hold signalled while the controller answers")
	}
	f.mu.Lock()
	f.fail = true // the leader died
	f.mu.Unlock()
	done := acquire()
	waitFor(t, func() bool { due, ok := clk.NextDue(); return ok && due.Equal(t0.Add(ElectionPause)) })
	if !signalled() || !c.Status().Holding {
		t.Fatal("the client holds the job for the next leader and says nothing")
	}
	f.mu.Lock()
	f.fail = false // the standby took over
	f.mu.Unlock()
	clk.Advance(ElectionPause)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !signalled() || c.Status().Holding {
		t.Fatal("the next leader answered and the client did not say its hold ended")
	}
}
