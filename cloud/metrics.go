package cloud

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the vpcnet_ec2_* series. Labels are bounded: action is one
// of the EC2 operations this client calls, code one of EC2's error codes
// or errorCodeFor's few fallbacks.
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	retries      *prometheus.CounterVec
	throttleWait *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_ec2_requests_total",
			Help: "EC2 calls made, by action; retries of one call count once.",
		}, []string{"action"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vpcnet_ec2_request_duration_seconds",
			Help:    "Time an EC2 call took, retries and token bucket waits included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}, []string{"action"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_ec2_errors_total",
			Help: "EC2 calls that failed after all retries, by action and AWS error code.",
		}, []string{"action", "code"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_ec2_retries_total",
			Help: "EC2 attempts beyond the first of each call (throttling, 5xx, timeouts), by action.",
		}, []string{"action"}),
		throttleWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vpcnet_ec2_throttle_wait_seconds",
			Help:    "Time an EC2 attempt waited for a token from the client-side bucket of its action.",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"action"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.errors, m.retries, m.throttleWait} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("register EC2 metrics: already registered: build one cloud.Client per process, or give each its own Registerer: %w", err)
			}
			return nil, fmt.Errorf("register EC2 metrics: %w", err)
		}
	}
	return m, nil
}
