package leakgc

import (
	"context"
	"github.com/vpcnet/vpcnet/clock"
	"time"
)

// Run scans after a random first delay and then every Interval, give or
// take the jitter, until ctx ends. A failed scan is logged and retried at
// the next interval: leaks wait, nothing else depends on them.
func (c *Collector) Run(ctx context.Context) {
	delay := c.firstDelay()
	for {
		c.log.Debug("next leaked ENI scan", "in", delay.String())
		tick, stop := clock.After(c.clk, delay)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-tick:
		}
		res, err := c.Scan(ctx)
		if ctx.Err() != nil {
			return
		}
		c.logScan(res, err)
		delay = c.nextDelay()
	}
}

func (c *Collector) logScan(res Result, err error) {
	attrs := []any{
		"seen", res.Seen, "deleted", res.Deleted, "gone", res.Gone,
		"young", res.SkippedYoung, "untagged", res.SkippedUntagged, "in_use", res.SkippedInUse,
		"deferred", res.Deferred, "errors", res.Errors, "refused", res.Refused,
	}
	switch {
	case err != nil:
		c.log.Warn("leaked ENI scan failed; retrying at the next interval", append(attrs, "error", err)...)
	case res.Deleted > 0 || res.Deferred > 0 || res.Refused > 0:
		c.log.Info("leaked ENI scan", attrs...)
	default:
		c.log.Debug("leaked ENI scan", attrs...)
	}
}

// firstDelay is uniform in [0, jitter): agents of a cluster rolled out
// together start their scans spread over the jitter.
func (c *Collector) firstDelay() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jitter <= 0 {
		return 0
	}
	return time.Duration(c.rng.Int64N(int64(c.jitter)))
}

// nextDelay is uniform in [interval-jitter/2, interval+jitter/2), so
// scans that happen to line up drift apart again.
func (c *Collector) nextDelay() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jitter <= 0 {
		return c.interval
	}
	return c.interval - c.jitter/2 + time.Duration(c.rng.Int64N(int64(c.jitter)))
}
