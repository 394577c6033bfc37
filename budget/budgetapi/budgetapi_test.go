package budgetapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/clock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestTheServerRefusesBadRequestsWithAReason(t *testing.T) {
	leading := true
	srv := NewServer(budget.New(budget.DefaultConfig()), clock.NewManual(t0), ServerOptions{
		Leading: func() bool { return leading },
		Authorize: func(_ context.Context, tok string) error {
			if tok == "unreviewable" {
				return fmt.Errorf("review: %w", ErrUnavailable)
			}
			if tok != "agent-token" {
				return errors.New("token of system:serviceaccount:default:intruder: not an agent")
			}
			return nil
		},
	})
	tests := []struct {
		name, method, path, token, body string
		notLeading                      bool
		code                            int
		want                            string
	}{
		{"granted", "POST", ReservePath, "agent-token", `{"node":"n1","actions":["CreateNetworkInterface"],"urgent":true}`, false, 200, `"waitMs":0`},
		{"GET", "GET", ReservePath, "agent-token", ``, false, 405, "use POST"},
		{"other path", "POST", "/v1/other", "agent-token", `{}`, false, 404, ""},
		{"no token", "POST", ReservePath, "", `{"node":"n1"}`, false, 401, "missing bearer token"},
		{"wrong token", "POST", ReservePath, "x", `{"node":"n1"}`, false, 403, "not an agent"},
		{"token not checkable now", "POST", ReservePath, "unreviewable", `{"node":"n1"}`, false, 503, "cannot check credentials"},
		{"not leading", "POST", ReservePath, "agent-token", `{"node":"n1"}`, true, 503, "not the leader"},
		{"garbage", "POST", ReservePath, "agent-token", `{"node":`, false, 400, "decode request"},
		{"unknown field", "POST", ReservePath, "agent-token", `{"node":"n1","tokens":5}`, false, 400, "unknown field"},
		{"two objects", "POST", ReservePath, "agent-token", `{"node":"n1"}{"node":"n2"}`, false, 400, "more than one"},
		{"no node", "POST", ReservePath, "agent-token", `{"actions":["CreateTags"]}`, false, 400, "names no node"},
		{"bad action", "POST", ReservePath, "agent-token", `{"node":"n1","actions":["rm -rf"]}`, false, 400, "not an EC2 action"},
		{"slot far off", "POST", ReservePath, "agent-token", `{"node":"n1","actions":["CreateTags"],"ticket":3,"slotMs":7200000}`, false, 400, "its ticket's slot is 7200000 ms from now"},
		{"age past an hour", "POST", ReservePath, "agent-token", `{"node":"n1","actions":["CreateTags"],"ageMs":3600001}`, false, 400, "its age is 3600001 ms"},
		{"bad subnet", "POST", ReservePath, "agent-token", `{"node":"n1","exhausted":["Subnet A"]}`, false, 400, "not a subnet id"},
		{"too large", "POST", ReservePath, "agent-token", `{"node":"` + strings.Repeat("n", MaxRequestBytes) + `"}`, false, 400, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leading = !tt.notLeading
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("%d %q; want %d and a body containing %q", rec.Code, rec.Body.String(), tt.code, tt.want)
			}
		})
	}
}

// fakeController answers asks with scripted grants and records them.
type fakeController struct {
	// during, when set, runs while a request is being answered.
	during func()

	mu      sync.Mutex // guards below
	asks    []budget.Request
	answers []budget.Grant
	fail    bool
	// notLeading answers as a replica that does not lead.
	notLeading bool
	// refuse answers 403, as for a token that is no agent's.
	refuse bool
}

func (f *fakeController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := decodeRequest(r.Body)
	if f.during != nil {
		f.during()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || f.fail {
		http.Error(w, "broken", http.StatusInternalServerError)
		return
	}
	if f.refuse {
		http.Error(w, "not an agent", http.StatusForbidden)
		return
	}
	if f.notLeading {
		NewServer(nil, nil, ServerOptions{Leading: func() bool { return false }}).ServeHTTP(w, r)
		return
	}
	f.asks = append(f.asks, req)
	g := budget.Grant{}
	if len(f.answers) > 0 {
		g, f.answers = f.answers[0], f.answers[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(AnswerOf(g))
}

func (f *fakeController) recorded() []budget.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asks)
}

// TestTheClientWaitsAsToldAndAsksAgainWhenDeferred: a deferred job asks
// again after the deferral, with its urgency read afresh; a granted one
// waits the grant's wait on the client's clock; refusals EC2 gave are
// reported once.
func TestTheClientWaitsAsToldAndAsksAgainWhenDeferred(t *testing.T) {
	f := &fakeController{answers: []budget.Grant{{Deferred: 2 * time.Second}, {Wait: 3 * time.Second}}}
	hs := httptest.NewServer(f)
	defer hs.Close()
	clk := clock.NewManual(t0)
	c := NewClient(ClientOptions{Node: "n1", Clock: clk,
		Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil }})
	c.Throttled("CreateNetworkInterface")
	var urgent sync.Mutex
	isUrgent := false
	done := make(chan error, 1)
	go func() {
		done <- c.Acquire(context.Background(), []string{"CreateNetworkInterface"}, func() Need {
			urgent.Lock()
			defer urgent.Unlock()
			return Need{Urgent: isUrgent}
		})
	}()
	armed := func(at time.Time) func() bool {
		return func() bool { due, ok := clk.NextDue(); return ok && due.Equal(at) }
	}
	waitFor(t, armed(t0.Add(2*time.Second)))
	urgent.Lock()
	isUrgent = true // pods came while the job was deferred
	urgent.Unlock()
	clk.Advance(2 * time.Second)
	waitFor(t, armed(t0.Add(5*time.Second)))
	select {
	case <-done:
		t.Fatal("Acquire returned before the grant's wait")
	default:
	}
	clk.Advance(3 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	asks := f.recorded()
	if asks[0].Urgent || !asks[1].Urgent {
		t.Errorf("urgency asked %v then %v; want false then true", asks[0].Urgent, asks[1].Urgent)
	}
	if !slices.Equal(asks[0].Throttled, []string{"CreateNetworkInterface"}) || len(asks[1].Throttled) != 0 {
		t.Errorf("throttled reported %v then %v; want once, in the first ask", asks[0].Throttled, asks[1].Throttled)
	}
}

// TestWithoutAControllerTheClientStepsAsideForAWhile: a failed ask lets
// the job go at once, later asks go at once without trying for a while,
// and then the controller is looked up again. A replica that does not
// lead yet (the Lease already names it) costs only an election's pause,
// not the whole Alone period.
func TestWithoutAControllerTheClientStepsAsideForAWhile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(f *fakeController)
		aside   time.Duration
	}{
		{"controller broken", func(f *fakeController) { f.fail = true }, 30 * time.Second},
		{"replica not leading yet", func(f *fakeController) { f.notLeading = true }, ElectionPause},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeController{}
			tc.breakIt(f)
			hs := httptest.NewServer(f)
			defer hs.Close()
			clk := clock.NewManual(t0)
			lookups := 0
			var outcomes []string
			c := NewClient(ClientOptions{Node: "n1", Clock: clk, Alone: 30 * time.Second,
				Endpoint: func(context.Context) (string, error) {
					lookups++
					return strings.TrimPrefix(hs.URL, "http://"), nil
				},
				Observe: func(o string, _ time.Duration) { outcomes = append(outcomes, o) }})
			never := func() Need { return Need{} }
			acquire := func() {
				t.Helper()
				if err := c.Acquire(context.Background(), []string{"AttachNetworkInterface"}, never); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				acquire()
			}
			if lookups != 1 || len(f.recorded()) != 0 {
				t.Fatalf("%d lookups; want 1 (then alone for %v)", lookups, tc.aside)
			}
			f.mu.Lock()
			f.fail, f.notLeading = false, false
			f.mu.Unlock()
			clk.Advance(tc.aside - time.Millisecond)
			acquire()
			if lookups != 1 {
				t.Fatalf("%v after the failure the controller was looked up again; want alone for %v", tc.aside-time.Millisecond, tc.aside)
			}
			clk.Advance(time.Millisecond)
			acquire()
			if lookups != 2 || len(f.recorded()) != 1 {
				t.Fatalf("after %v: %d lookups, %d asks; want the controller looked up and asked again", tc.aside, lookups, len(f.recorded()))
			}
			if want := []string{Alone, Alone, Alone, Alone, Granted}; !slices.Equal(outcomes, want) {
				t.Errorf("outcomes %v; want %v", outcomes, want)
			}
		})
	}
}

// TestPressureIsAskedWithTheSubnetsAndReportsExhaustion: the node's
// subnets and those found exhausted go to the controller; its answer
// comes back; without a controller there is no pressure.
func TestPressureIsAskedWithTheSubnetsAndReportsExhaustion(t *testing.T) {
	f := &fakeController{answers: []budget.Grant{{Pressure: []string{"subnet-1"}}}}
	hs := httptest.NewServer(f)
	defer hs.Close()
	c := NewClient(ClientOptions{Node: "n1", Clock: clock.NewManual(t0),
		Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil }})
	got := c.Pressure(context.Background(), []string{"subnet-1", "subnet-2"}, []string{"subnet-1"})
	if !slices.Equal(got, []string{"subnet-1"}) {
		t.Fatalf("pressure %v; want [subnet-1]", got)
	}
	asks := f.recorded()
	if len(asks) != 1 || !slices.Equal(asks[0].Subnets, []string{"subnet-1", "subnet-2"}) || !slices.Equal(asks[0].Exhausted, []string{"subnet-1"}) || len(asks[0].Actions) != 0 {
		t.Fatalf("asked %+v; want the subnets, the exhausted one and no action", asks)
	}
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	if got := c.Pressure(context.Background(), []string{"subnet-1"}, nil); got != nil {
		t.Fatalf("pressure %v from a failing controller; want none", got)
	}
}

// Refusals reported in an ask the controller did not answer are
// reported again, once each: a request naming more than MaxNames is
// refused, and the node would go alone for good.
func TestRefusalsAreReportedAgainAfterAFailedAskOnceEach(t *testing.T) {
	f := &fakeController{fail: true}
	hs := httptest.NewServer(f)
	defer hs.Close()
	clk := clock.NewManual(t0)
	c := NewClient(ClientOptions{Node: "n1", Clock: clk, Alone: time.Second,
		Endpoint: func(context.Context) (string, error) { return strings.TrimPrefix(hs.URL, "http://"), nil }})
	var actions []string
	for i := range MaxNames {
		actions = append(actions, fmt.Sprintf("Action%d", i))
	}
	for _, a := range actions {
		c.Throttled(a)
	}
	// The same actions are refused again while the failing ask is out.
	f.during = func() {
		for _, a := range actions {
			c.Throttled(a)
		}
	}
	never := func() Need { return Need{} }
	if err := c.Acquire(context.Background(), []string{"CreateNetworkInterface"}, never); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.fail, f.during = false, nil
	f.mu.Unlock()
	clk.Advance(2 * time.Second)
	if err := c.Acquire(context.Background(), []string{"CreateNetworkInterface"}, never); err != nil {
		t.Fatal(err)
	}
	asks := f.recorded()
	if len(asks) != 1 || !slices.Equal(asks[0].Throttled, actions) {
		t.Fatalf("asks after the controller came back: %+v; want one reporting each of the %d refused actions once", asks, MaxNames)
	}
}

func TestHolderIdentityRoundTrips(t *testing.T) {
	hp, err := HolderEndpoint(HolderIdentity("vpcnet-budget-7d9f-x2", "10.0.3.17:61680"))
	if err != nil || hp != "10.0.3.17:61680" {
		t.Fatalf("HolderEndpoint = %q, %v", hp, err)
	}
	for _, bad := range []string{"", "vpcnet-budget-7d9f-x2", "pod 10.0.3.17"} {
		if _, err := HolderEndpoint(bad); err == nil {
			t.Errorf("HolderEndpoint(%q) accepted", bad)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"node":"n1","actions":["CreateNetworkInterface"],"urgent":true,"throttled":["AttachNetworkInterface"]}`))
	f.Add([]byte(`{"node":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		if Validate(r) != nil {
			t.Fatalf("decodeRequest accepted an invalid request %+v", r)
		}
		budget.New(budget.DefaultConfig()).Reserve(t0, r) // never panics
	})
}

// waitFor waits for the client's goroutine to reach cond (a timer armed
// on the manual clock); the outcome never depends on the wall clock.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A request's age is the longer of its hold through a failover and its
// pods' wait; warm-pool work's pods do not count, and no age passes an
// hour (budget.MaxSlot: the server refuses more).
func TestARequestIsAsOldAsItsHoldOrItsPodsWait(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	for _, tc := range []struct {
		name      string
		heldSince time.Time
		need      Need
		want      time.Duration
	}{
		{"new", time.Time{}, Need{Urgent: true}, 0},
		{"held", now.Add(-4 * time.Second), Need{Urgent: true}, 4 * time.Second},
		{"pods waited longer", now.Add(-4 * time.Second), Need{Urgent: true, Since: now.Add(-9 * time.Second)}, 9 * time.Second},
		{"held longer", now.Add(-4 * time.Second), Need{Urgent: true, Since: now.Add(-time.Second)}, 4 * time.Second},
		{"warm pool", time.Time{}, Need{Since: now.Add(-9 * time.Second)}, 0},
		{"an hour at most", time.Time{}, Need{Urgent: true, Since: t0}, time.Hour},
	} {
		if got := Age(now, tc.heldSince, tc.need); got != tc.want.Milliseconds() {
			t.Errorf("%s: age %d ms; want %v", tc.name, got, tc.want)
		}
	}
}
