package agent

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/ipam"
)

// metrics are the agent's vpcnet_* series. Pool gauges are read at scrape
// time from the pool itself, so they can never disagree with it.
type metrics struct {
	gatherer prometheus.Gatherer
	now      func() time.Time

	rpcs             *prometheus.CounterVec
	rpcDuration      *prometheus.HistogramVec
	noAddress        *prometheus.CounterVec
	reconcilePasses  *prometheus.CounterVec
	reconcileActions *prometheus.CounterVec
	checkpointWrite  prometheus.Histogram
	checkpointErrors prometheus.Counter
	startup          prometheus.Gauge
	unknownRoutes    prometheus.Gauge
	staleEntries     prometheus.Gauge
	maxPods          prometheus.Gauge
	addressablePods  prometheus.Gauge
	maxPodsMismatch  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, g prometheus.Gatherer, a *Agent) (*metrics, error) {
	m := &metrics{
		gatherer: g,
		now:      a.now,
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_rpc_requests_total", Help: "Plugin requests by method (add, del, gc) and result.",
		}, []string{"method", "result"}),
		rpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vpcnet_rpc_duration_seconds", Help: "Time to answer a plugin request, waiting for addresses included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method"}),
		noAddress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_no_address_errors_total", Help: "Add requests that got no address, by what ran out.",
		}, []string{"reason"}),
		reconcilePasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_reconcile_passes_total", Help: "Reconcile passes by result.",
		}, []string{"result"}),
		reconcileActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_reconcile_actions_total", Help: "Planner actions performed, by kind and result.",
		}, []string{"kind", "result"}),
		checkpointWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vpcnet_checkpoint_write_seconds", Help: "Time to write the checkpoint durably.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}),
		checkpointErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vpcnet_checkpoint_write_errors_total", Help: "Checkpoint writes that failed; the change they carried was not made.",
		}),
		startup: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_startup_duration_seconds", Help: "Time from start to ready.",
		}),
		unknownRoutes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_unknown_pod_routes", Help: "Addresses the host routes to a pod that the checkpoint does not know; quarantined, and nothing is released while any exist.",
		}),
		staleEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_stale_checkpoint_entries", Help: "Checkpoint entries whose address is on no attached ENI; kept and never released automatically.",
		}),
		maxPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_max_pods", Help: "The node's max pods the pool is planned for: the kubelet's, MAX_PODS or EKS's rule (/v1/status says which).",
		}),
		addressablePods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_addressable_pods", Help: "The most pods the node's ENIs can give addresses to.",
		}),
		maxPodsMismatch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vpcnet_max_pods_mismatch", Help: "1 when the max pods in effect is above what the node can address (above_addressable) or below half of EKS's recommended value (below_capacity).",
		}, []string{"kind"}),
	}
	cs := []prometheus.Collector{m.rpcs, m.rpcDuration, m.noAddress, m.reconcilePasses, m.reconcileActions,
		m.checkpointWrite, m.checkpointErrors, m.startup, m.unknownRoutes, m.staleEntries,
		m.maxPods, m.addressablePods, m.maxPodsMismatch, poolCollector{a}}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// observeRPC counts a finished plugin request; call it deferred with the
// request's start and a pointer to its error.
func (m *metrics) observeRPC(method string, start time.Time, err *error) {
	result := "ok"
	switch {
	case nodestate.IsNoAddress(*err):
		result = "no_address"
	case *err != nil:
		result = "error"
	}
	m.rpcs.WithLabelValues(method, result).Inc()
	m.rpcDuration.WithLabelValues(method).Observe(m.now().Sub(start).Seconds())
}

var (
	descAddresses = prometheus.NewDesc("vpcnet_addresses", "Pod addresses in the pool by state (assigned, cooling, free).", []string{"state"}, nil)
	descENIs      = prometheus.NewDesc("vpcnet_enis_attached", "ENIs in the pool, primary included.", nil, nil)
	descENIsMax   = prometheus.NewDesc("vpcnet_enis_max", "ENIs the instance type and MAX_ENI allow.", nil, nil)
	descPrefixes  = prometheus.NewDesc("vpcnet_prefixes", "Delegated /28 prefixes in the pool.", nil, nil)
	descWaiting   = prometheus.NewDesc("vpcnet_add_waiting", "Add requests waiting for an address.", nil, nil)
	descReady     = prometheus.NewDesc("vpcnet_ready", "1 when every readiness condition holds.", nil, nil)
	descFallback  = prometheus.NewDesc("vpcnet_prefix_fallback", "1 while the node gives pods single secondary addresses because its subnet has no free /28 for a prefix (reason subnet_fragmented).",
		[]string{"reason", "subnet"}, nil)
)

// poolCollector reads the pool when scraped.
type poolCollector struct{ a *Agent }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAddresses, descENIs, descENIsMax, descPrefixes, descWaiting, descReady, descFallback} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	var st ipam.Stats
	var waiting int
	var fallback *nodestate.PrefixFallback
	if h := a.summary.Load(); h != nil {
		st, waiting, fallback = h.view.Stats, h.view.Waiting, h.view.PrefixFallback
	}
	maxENIs := a.maxENIs()
	prefixes := 0
	for _, e := range st.ENIs {
		for _, b := range e.Blocks {
			if b.Prefix.Bits() < 32 {
				prefixes++
			}
		}
	}
	ready, _ := a.ready.get()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descAddresses, float64(st.Assigned), "assigned")
	gauge(descAddresses, float64(st.Cooling), "cooling")
	gauge(descAddresses, float64(st.Free), "free")
	gauge(descENIs, float64(len(st.ENIs)))
	gauge(descENIsMax, float64(maxENIs))
	gauge(descPrefixes, float64(prefixes))
	gauge(descWaiting, float64(waiting))
	gauge(descReady, b2f(ready))
	if fallback != nil {
		gauge(descFallback, 1, fallback.Reason, fallback.SubnetID)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
