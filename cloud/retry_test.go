package cloud

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

const detachOK = `<return>true</return>`

func TestTransientFailuresAreRetriedAndCounted(t *testing.T) {
	tests := []struct {
		name   string
		status int
		code   string
	}{
		{"throttled", 400, "RequestLimitExceeded"},
		{"server error", 500, "InternalError"},
		{"unavailable", 503, "Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const failures = 3
			f := &fakeEC2{reply: func(n int, _ url.Values) (int, string) {
				if n < failures {
					return tt.status, ec2Error(tt.code, "try again")
				}
				return 200, ec2OK("DetachNetworkInterface", detachOK)
			}}
			c, reg := newFakeClient(t, f, nil)
			if err := c.DetachENI(context.Background(), "eni-attach-1", false); err != nil {
				t.Fatalf("DetachENI through %d %s replies: %v", failures, tt.code, err)
			}
			if n := len(f.requests()); n != failures+1 {
				t.Errorf("EC2 saw %d requests, want %d", n, failures+1)
			}
			if v := testutil.ToFloat64(c.metrics.retries.WithLabelValues("DetachNetworkInterface")); v != failures {
				t.Errorf("vpcnet_ec2_retries_total = %v, want %d", v, failures)
			}
			if v := testutil.ToFloat64(c.metrics.requests.WithLabelValues("DetachNetworkInterface")); v != 1 {
				t.Errorf("vpcnet_ec2_requests_total = %v, want 1 (one call)", v)
			}
			if n, err := testutil.GatherAndCount(reg, "vpcnet_ec2_errors_total"); err != nil || n != 0 {
				t.Errorf("vpcnet_ec2_errors_total has %d series (err %v), want none for a call that succeeded", n, err)
			}
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 400, ec2Error("RequestLimitExceeded", "Request limit exceeded.")
	}}
	c, _ := newFakeClient(t, f, func(o *Options) { o.MaxAttempts = 4 })
	err := c.DetachENI(context.Background(), "eni-attach-1", false)
	if !IsThrottled(err) {
		t.Fatalf("err = %v, want throttled", err)
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("EC2 saw %d requests, want MaxAttempts = 4", n)
	}
	if v := testutil.ToFloat64(c.metrics.errors.WithLabelValues("DetachNetworkInterface", "RequestLimitExceeded")); v != 1 {
		t.Errorf("vpcnet_ec2_errors_total = %v, want 1", v)
	}
}

// The SDK's default retry quota (500 tokens, 5 per retry) would refuse all
// retries after ~100 of them, which under account-wide throttling is when
// retrying matters most.
func TestHeavyThrottlingDoesNotExhaustARetryQuota(t *testing.T) {
	const calls, attempts = 150, 3
	f := &fakeEC2{reply: func(n int, _ url.Values) (int, string) {
		if n%attempts != attempts-1 {
			return 400, ec2Error("RequestLimitExceeded", "Request limit exceeded.")
		}
		return 200, ec2OK("DetachNetworkInterface", detachOK)
	}}
	c, _ := newFakeClient(t, f, func(o *Options) {
		o.MaxAttempts = attempts
		o.Buckets = map[string]Bucket{"DetachNetworkInterface": {Burst: 1000, Refill: 1000}}
	})
	for i := range calls {
		if err := c.DetachENI(context.Background(), "eni-attach-1", false); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if v := testutil.ToFloat64(c.metrics.retries.WithLabelValues("DetachNetworkInterface")); v != calls*(attempts-1) {
		t.Errorf("vpcnet_ec2_retries_total = %v, want %d", v, calls*(attempts-1))
	}
}

func TestHungAttemptIsRetriedWithinTheCall(t *testing.T) {
	ok := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 200, ec2OK("DetachNetworkInterface", detachOK)
	}}
	var seen atomic.Int32
	release := make(chan struct{})
	srv := simtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		ok.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(release) })
	simtest.IsolateAWSEnv(t)
	o := testOptions(srv, nil)
	o.AttemptTimeout = 200 * time.Millisecond
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DetachENI(context.Background(), "eni-attach-1", false); err != nil {
		t.Fatalf("DetachENI after one hung attempt: %v", err)
	}
	if v := testutil.ToFloat64(c.metrics.retries.WithLabelValues("DetachNetworkInterface")); v != 1 {
		t.Errorf("vpcnet_ec2_retries_total = %v, want 1", v)
	}
}

func TestCallTimeoutBoundsTheWholeCall(t *testing.T) {
	release := make(chan struct{})
	srv := simtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) })
	simtest.IsolateAWSEnv(t)
	o := testOptions(srv, nil)
	o.CallTimeout = 300 * time.Millisecond
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	err = c.DeleteENI(context.Background(), "eni-1")
	if err == nil {
		t.Fatal("DeleteENI against a server that never answers succeeded")
	}
	t.Logf("error reads: %v", err)
	if code := metricCode(err); code != "DeadlineExceeded" {
		t.Errorf("error %v has metric code %q, want DeadlineExceeded", err, code)
	}
}
