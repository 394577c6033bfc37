package leakgc

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	collected  prometheus.Counter
	scanErrors *prometheus.CounterVec
	seen       prometheus.Gauge
	lastScan   prometheus.Gauge
}

// Values of the op label of vpcnet_leaked_eni_scan_errors_total.
const (
	opList   = "list"
	opDelete = "delete"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		collected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vpcnet_leaked_enis_collected_total",
			Help: "Leaked ENIs this collector deleted.",
		}),
		scanErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_leaked_eni_scan_errors_total",
			Help: "Failed calls of the leaked ENI collector, by op (list, delete).",
		}, []string{"op"}),
		seen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_leaked_enis_seen",
			Help: "Available, unattached ENIs of ours (of any age) found by the last completed scan.",
		}),
		lastScan: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_leaked_eni_last_scan_timestamp_seconds",
			Help: "Unix time of the last scan whose listing succeeded.",
		}),
	}
	// Both ops exist from the start, so rate() and alerts see a zero.
	m.scanErrors.WithLabelValues(opList)
	m.scanErrors.WithLabelValues(opDelete)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.collected, m.scanErrors, m.seen, m.lastScan} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}
