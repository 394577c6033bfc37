package controller

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/budget"
)

// metrics are the controller's Prometheus series. Actions are labelled
// by name only when the budget's configuration lists them, else "other":
// an agent's request cannot grow the series without bound.
type metrics struct {
	known     map[string]bool
	requests  *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	throttled *prometheus.CounterVec
	auth      *prometheus.CounterVec
	leader    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, cfg budget.Config, stats func() []budget.ActionStats) (*metrics, error) {
	m := &metrics{
		known: map[string]bool{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_budget_requests_total",
			Help: "EC2 calls asked for by agents, by action, urgency (pods waiting) and outcome (granted or deferred).",
		}, []string{"action", "urgent", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vpcnet_budget_grant_wait_seconds",
			Help:    "How long granted requests were told to wait before calling EC2, by urgency.",
			Buckets: []float64{0, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"urgent"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_budget_throttled_reports_total",
			Help: "RequestLimitExceeded answers agents reported, by action: a wave of them lowers the action's rate for a while, to what the account's other clients left since the wave before (half, the first time).",
		}, []string{"action"}),
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vpcnet_budget_auth_total",
			Help: "Bearer tokens checked, by result: allowed, refused (not an allowed client), error (the API server could not be asked).",
		}, []string{"result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vpcnet_budget_leader",
			Help: "1 while this replica holds the Lease and answers agents, else 0.",
		}),
	}
	for a := range cfg.Buckets {
		m.known[a] = true
	}
	for _, c := range []prometheus.Collector{m.requests, m.wait, m.throttled, m.auth, m.leader, statsCollector{m, stats}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) action(a string) string {
	if m.known[a] {
		return a
	}
	return "other"
}

// observe counts one answered request.
func (m *metrics) observe(r budget.Request, g budget.Grant) {
	urgent := strconv.FormatBool(r.Urgent)
	outcome := "granted"
	if !g.Granted() {
		outcome = "deferred"
	} else {
		m.wait.WithLabelValues(urgent).Observe(g.Wait.Seconds())
	}
	for _, a := range r.Actions {
		m.requests.WithLabelValues(m.action(a), urgent, outcome).Inc()
	}
	for _, a := range r.Throttled {
		m.throttled.WithLabelValues(m.action(a)).Inc()
	}
}

var (
	backlogDesc = prometheus.NewDesc("vpcnet_budget_backlog_seconds",
		"How far ahead of now the action's schedule is booked: how long a new urgent call would wait.", []string{"action"}, nil)
	rateDesc = prometheus.NewDesc("vpcnet_budget_rate",
		"Calls per second the action is granted at now (the account's refill × margin, lowered while EC2 refuses).", []string{"action"}, nil)
)

// statsCollector reads the ledger's schedule at scrape time.
type statsCollector struct {
	m     *metrics
	stats func() []budget.ActionStats
}

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDesc
	ch <- rateDesc
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.stats() {
		if !c.m.known[s.Action] {
			continue
		}
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, s.Backlog.Seconds(), s.Action)
		ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, s.Rate, s.Action)
	}
}
