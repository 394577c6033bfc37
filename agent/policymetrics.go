package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// policyMetrics are the vpcnet_policy_* series.
type policyMetrics struct {
	writes     *prometheus.CounterVec
	writeTime  prometheus.Histogram
	dropsDesc  *prometheus.Desc
	k          *policyKeeper
	scrapeWait time.Duration
}

// register adds the keeper's series to reg. Drops are read from the
// kernel's counters at scrape time, so they can never disagree with it.
func (k *policyKeeper) register(reg prometheus.Registerer) error {
	m := &policyMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_policy_writes_total", Help: "Writes of the node's NetworkPolicy rules, by result.",
		}, []string{"result"}),
		writeTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vpcnet_policy_write_seconds", Help: "Time to compile and write the node's NetworkPolicy rules.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		dropsDesc: prometheus.NewDesc("vpcnet_policy_dropped_packets_total",
			"Packets NetworkPolicy dropped, by pod and direction (ingress: to the pod; egress: from it).",
			[]string{"namespace", "pod", "direction"}, nil),
		k:          k,
		scrapeWait: 2 * time.Second,
	}
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vpcnet_policy_lag_seconds", Help: "How long the oldest change the NetworkPolicy rules do not show yet has waited; 0 when they are current.",
	}, func() float64 {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.status.PendingSince == nil {
			return 0
		}
		return k.clk.Now().Sub(*k.status.PendingSince).Seconds()
	})
	isolated := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vpcnet_policy_isolated_pods", Help: "Pods on this node that some NetworkPolicy isolates in at least one direction.",
	}, func() float64 {
		k.mu.Lock()
		defer k.mu.Unlock()
		return float64(k.status.Isolated)
	})
	for _, c := range []prometheus.Collector{m.writes, m.writeTime, lag, isolated, m} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	k.met = m
	return nil
}

func (m *policyMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.dropsDesc }

func (m *policyMetrics) Collect(ch chan<- prometheus.Metric) {
	k := m.k
	if !k.on() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.scrapeWait)
	defer cancel()
	drops, err := k.o.Rules.PolicyDrops(ctx)
	if err != nil {
		k.log.Warn("NetworkPolicy drop counters unreadable", "err", err)
		return
	}
	k.mu.Lock()
	last := k.last
	k.mu.Unlock()
	for _, r := range last.Pods {
		d, ok := drops[r.Pod.IP]
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.dropsDesc, prometheus.CounterValue, float64(d.Ingress), r.Pod.Namespace, r.Pod.Name, "ingress")
		ch <- prometheus.MustNewConstMetric(m.dropsDesc, prometheus.CounterValue, float64(d.Egress), r.Pod.Namespace, r.Pod.Name, "egress")
	}
}

// observe records one write.
func (m *policyMetrics) observe(took time.Duration, err error) {
	if m == nil {
		return
	}
	m.writeTime.Observe(took.Seconds())
	if err != nil {
		m.writes.WithLabelValues("error").Inc()
	} else {
		m.writes.WithLabelValues("ok").Inc()
	}
}
