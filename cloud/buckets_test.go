package cloud

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

func subnetsFake() *fakeEC2 {
	return &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 200, ec2OK("DescribeSubnets", `<subnetSet><item><subnetId>subnet-a</subnetId><cidrBlock>10.0.0.0/24</cidrBlock><availabilityZone>us-west-2a</availabilityZone><availableIpAddressCount>250</availableIpAddressCount></item></subnetSet>`)
	}}
}

func TestBucketRefusesAtOnceWhenTheTokenComesAfterTheDeadline(t *testing.T) {
	f := subnetsFake()
	c, _ := newFakeClient(t, f, func(o *Options) {
		o.CallTimeout = time.Second
		o.Buckets = map[string]Bucket{"DescribeSubnets": {Burst: 1, Refill: 0.001}}
	})
	ctx := context.Background()
	if _, err := c.DescribeSubnets(ctx, "subnet-a"); err != nil {
		t.Fatalf("first call, with a token in the bucket: %v", err)
	}
	_, err := c.DescribeSubnets(ctx, "subnet-a")
	if !IsThrottled(err) || !errors.Is(err, ErrClientThrottled) {
		t.Fatalf("second call = %v, want the client-side throttle", err)
	}
	if ErrorCode(err) != "" {
		t.Errorf("ErrorCode = %q: EC2 never saw the call, so there is no AWS code", ErrorCode(err))
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("EC2 saw %d requests, want 1: the refused call must not reach it", n)
	}
	if v := testutil.ToFloat64(c.metrics.errors.WithLabelValues("DescribeSubnets", "ClientThrottled")); v != 1 {
		t.Errorf("vpcnet_ec2_errors_total{code=ClientThrottled} = %v, want 1", v)
	}
}

func TestBucketWaitEndsWhenTheCallerCancels(t *testing.T) {
	f := subnetsFake()
	c, _ := newFakeClient(t, f, func(o *Options) {
		// The next token comes in 20s, inside the 30s call timeout, so
		// the call waits for it rather than refusing.
		o.Buckets = map[string]Bucket{"DescribeSubnets": {Burst: 1, Refill: 0.05}}
	})
	if _, err := c.DescribeSubnets(context.Background(), "subnet-a"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.DescribeSubnets(ctx, "subnet-a")
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call kept waiting for a token after its context was cancelled")
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("EC2 saw %d requests, want 1", n)
	}
}

func TestBucketPacesCallsAtItsRefillRate(t *testing.T) {
	f := subnetsFake()
	c, reg := newFakeClient(t, f, func(o *Options) {
		o.Buckets = map[string]Bucket{"DescribeSubnets": {Burst: 1, Refill: 20}}
	})
	const calls = 4
	start := time.Now()
	for range calls {
		if _, err := c.DescribeSubnets(context.Background(), "subnet-a"); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	// A burst of one at 20/s: the last token cannot come sooner than 150ms
	// after the first.
	if floor := time.Duration(calls-1) * 50 * time.Millisecond; elapsed < floor*95/100 {
		t.Errorf("%d calls took %v; the bucket allows no less than %v", calls, elapsed, floor)
	}
	n, sum := histogram(t, reg, "vpcnet_ec2_throttle_wait_seconds", "DescribeSubnets")
	if n != calls || sum <= 0 {
		t.Errorf("throttle wait: %d observations summing %.3fs, want %d with a positive sum", n, sum, calls)
	}
}

func TestInvalidBucketIsRefusedAtStart(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	o := testOptions("http://127.0.0.1:1", nil)
	o.Buckets = map[string]Bucket{"CreateNetworkInterface": {Burst: 0, Refill: 5}}
	if _, err := New(context.Background(), o); err == nil {
		t.Fatal("New accepted a bucket of burst 0, which would block every create")
	}
}

func TestActionsWithoutATableEntryStillGetABucket(t *testing.T) {
	bs, err := newBuckets(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"DescribeVpcs", "CreateTags"} {
		if bs.limiter(action) == nil {
			t.Errorf("%s has no bucket", action)
		}
	}
	if bs.limiter("DescribeVpcs") == bs.limiter("CreateTags") {
		t.Error("an unlisted describe and an unlisted mutation share one bucket; EC2 counts them apart")
	}
}
