package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Bucket is a token bucket: Burst requests at once, then Refill per second.
type Bucket struct {
	Burst  int
	Refill float64
}

// DefaultBuckets are EC2's published request token buckets for the actions
// this client calls ("Request throttling for the Amazon EC2 API",
// https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html,
// "Request token bucket sizes and refill rates"). EC2 counts per account and
// Region, shared by every node, so one process at the account's rate can
// still be throttled; these buckets only stop this process from being the
// one that throttles everyone.
//
//   - CreateNetworkInterface, DeleteNetworkInterface, AssignPrivateIpAddresses,
//     UnassignPrivateIpAddresses, AssignIpv6Addresses,
//     ModifyNetworkInterfaceAttribute are
//     uncategorised actions with their own bucket: 100, refill 5/s.
//   - AttachNetworkInterface, DetachNetworkInterface are plain mutating
//     actions: 50, refill 5/s.
//   - Describe* are non-mutating: 100, refill 20/s. DescribeNetworkInterfaces
//     falls in the smaller "unfiltered and unpaginated" bucket (50, 10/s)
//     only when called with neither a filter nor pagination, which this
//     client never does.
func DefaultBuckets() map[string]Bucket {
	return map[string]Bucket{
		"CreateNetworkInterface":          {Burst: 100, Refill: 5},
		"DeleteNetworkInterface":          {Burst: 100, Refill: 5},
		"AssignPrivateIpAddresses":        {Burst: 100, Refill: 5},
		"UnassignPrivateIpAddresses":      {Burst: 100, Refill: 5},
		"AssignIpv6Addresses":             {Burst: 100, Refill: 5},
		"ModifyNetworkInterfaceAttribute": {Burst: 100, Refill: 5},
		"AttachNetworkInterface":          {Burst: 50, Refill: 5},
		"DetachNetworkInterface":          {Burst: 50, Refill: 5},
		"DescribeNetworkInterfaces":       {Burst: 100, Refill: 20},
		"DescribeSubnets":                 {Burst: 100, Refill: 20},
		"DescribeInstanceTypes":           {Burst: 100, Refill: 20},
	}
}

// Fallbacks for an action missing from the table: EC2's non-mutating and
// mutating categories.
var (
	describeBucket = Bucket{Burst: 100, Refill: 20}
	mutateBucket   = Bucket{Burst: 50, Refill: 5}
)

// ErrClientThrottled marks a call refused by this client's own token bucket
// because the wait for a token would outlast the call's deadline. IsThrottled
// reports true for it.
var ErrClientThrottled = errors.New("client-side rate limit: no token before the call deadline")

// buckets holds one limiter per action. The map is built in New and never
// written again, so it needs no lock (rate.Limiter has its own).
type buckets struct {
	byAction map[string]*rate.Limiter
	describe *rate.Limiter
	mutate   *rate.Limiter
}

func newBuckets(overrides map[string]Bucket) (*buckets, error) {
	all := DefaultBuckets()
	for action, b := range overrides {
		all[action] = b
	}
	bs := &buckets{byAction: map[string]*rate.Limiter{}}
	for action, b := range all {
		if b.Burst < 1 || b.Refill <= 0 {
			return nil, fmt.Errorf("token bucket for %s: burst %d, refill %g/s: both must be positive", action, b.Burst, b.Refill)
		}
		bs.byAction[action] = rate.NewLimiter(rate.Limit(b.Refill), b.Burst)
	}
	bs.describe = rate.NewLimiter(rate.Limit(describeBucket.Refill), describeBucket.Burst)
	bs.mutate = rate.NewLimiter(rate.Limit(mutateBucket.Refill), mutateBucket.Burst)
	return bs, nil
}

func (bs *buckets) limiter(action string) *rate.Limiter {
	if l, ok := bs.byAction[action]; ok {
		return l
	}
	if strings.HasPrefix(action, "Describe") {
		return bs.describe
	}
	return bs.mutate
}

// wait takes one token for action, waiting as long as ctx allows. It
// returns how long it waited.
func (bs *buckets) wait(ctx context.Context, action string) (time.Duration, error) {
	start := time.Now()
	if err := bs.limiter(action).Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return time.Since(start), ctx.Err()
		}
		// rate.Limiter refuses up front when the token would come after
		// the deadline; waiting would only burn the caller's time.
		return time.Since(start), fmt.Errorf("%s: %w", action, ErrClientThrottled)
	}
	return time.Since(start), nil
}
