package sim

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// throttle holds EC2's account-wide request token buckets: one per action,
// each sized by the action's class (Describe* or mutating) unless the
// topology names the action. A request takes one token; an empty bucket
// answers RequestLimitExceeded and refills at its rate.
type throttle struct {
	spec ThrottleSpec
	// mu guards buckets.
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	burst  float64
	refill float64 // tokens per second
	tokens float64
	last   time.Time
}

func newThrottle(spec ThrottleSpec) *throttle {
	return &throttle{spec: spec, buckets: map[string]*bucket{}}
}

// sizeFor returns the bucket an action gets.
func (t *throttle) sizeFor(action string) BucketSpec {
	if b, ok := t.spec.Actions[action]; ok {
		return b
	}
	class, def := t.spec.Mutating, defaultMutatingBucket
	if strings.HasPrefix(action, "Describe") {
		class, def = t.spec.Describe, defaultDescribeBucket
	}
	if class == (BucketSpec{}) {
		return def
	}
	return class
}

// allow takes a token from action's bucket at now, reporting false when
// the bucket is empty.
func (t *throttle) allow(action string, now time.Time) bool {
	if t.spec.Disabled {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.buckets[action]
	if !ok {
		size := t.sizeFor(action)
		b = &bucket{burst: float64(size.Burst), refill: size.Refill, tokens: float64(size.Burst), last: now}
		t.buckets[action] = b
	}
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.refill)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// SetThrottle replaces the account's request buckets with spec's, every
// bucket full. A driver that sets a cluster up before measuring it can
// disable throttling for the set-up and restore the account's buckets
// for the measured part.
func (c *Cloud) SetThrottle(spec ThrottleSpec) error {
	if err := spec.validate(); err != nil {
		return fmt.Errorf("set throttle: %w", err)
	}
	t := newThrottle(spec)
	c.throttleMu.Lock()
	c.throttle = t
	c.throttleMu.Unlock()
	return nil
}

func (c *Cloud) throttleNow() *throttle {
	c.throttleMu.Lock()
	defer c.throttleMu.Unlock()
	return c.throttle
}
