package controller

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/budget"
)

// Settings are the controller's, read from its environment by Load.
type Settings struct {
	// Port is where the reserve endpoint, health and metrics are served,
	// on every address of the node (the pod runs with hostNetwork).
	Port int
	// Pod, Namespace and PodIP come from the downward API. PodIP is the
	// node's address (hostNetwork): agents reach the leader there.
	Pod, Namespace string
	PodIP          netip.Addr
	// Lease is the name of the Lease in Namespace the replicas elect a
	// leader with; agents read it to find the leader.
	Lease string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader
	// election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Budget is the account's buckets and the margin granted.
	Budget budget.Config
	// Clients are the usernames (as a TokenReview reports them) allowed
	// to reserve: the agents' service account.
	Clients []string
	// Kubeconfig is a kubeconfig file; empty means the pod's service
	// account.
	Kubeconfig string
}

// Setting is one variable, for docs/settings.md.
type Setting struct {
	Name, Default, Meaning string
}

type setting struct {
	Setting
	// required settings have no default: unset is an error.
	required bool
	set      func(s *Settings, v string) error
}

// settings is every variable the controller reads.
var settings = []setting{
	{Setting{"POD_NAME", "", "The pod's name, from the downward API (metadata.name): the leader's identity in the Lease. Required."},
		true, func(s *Settings, v string) error { s.Pod = v; return nil }},
	{Setting{"POD_NAMESPACE", "", "The pod's namespace, from the downward API (metadata.namespace): where the Lease is. Required."},
		true, func(s *Settings, v string) error { s.Namespace = v; return nil }},
	{Setting{"POD_IP", "", "The pod's address, from the downward API (status.podIP): with hostNetwork the node's, which the leader writes into the Lease for agents to reach. Required."},
		true, func(s *Settings, v string) (err error) {
			if s.PodIP, err = netip.ParseAddr(v); err != nil {
				return errors.New("must be an IP address (set it from the downward API: status.podIP)")
			}
			return nil
		}},
	{Setting{"VPCNET_BUDGET_LISTEN_PORT", "61680", "TCP port of the reserve endpoint (/v1/reserve), /healthz, /readyz and /metrics, on every address of the node."},
		false, func(s *Settings, v string) (err error) {
			if s.Port, err = strconv.Atoi(v); err != nil || s.Port < 1 || s.Port > 65535 {
				return errors.New("must be a port number from 1 to 65535")
			}
			return nil
		}},
	{Setting{"VPCNET_BUDGET_LEASE", "vpcnet-budget", "Name of the Lease, in the pod's namespace, the replicas elect their leader with. The agents' VPCNET_BUDGET_LEASE names the same Lease as NAMESPACE/NAME."},
		false, func(s *Settings, v string) error {
			if !dnsSubdomain(v) {
				return errors.New("must be a Kubernetes object name: lower-case letters, digits, '-' and '.', at most 253")
			}
			s.Lease = v
			return nil
		}},
	{Setting{"VPCNET_BUDGET_LEASE_DURATION", "15s", "How long a leader's Lease lasts without renewal before another replica may take over."},
		false, func(s *Settings, v string) error { return duration(&s.LeaseDuration, v) }},
	{Setting{"VPCNET_BUDGET_RENEW_DEADLINE", "10s", "How long the leader keeps trying to renew its Lease before it stops leading; shorter than the lease duration."},
		false, func(s *Settings, v string) error { return duration(&s.RenewDeadline, v) }},
	{Setting{"VPCNET_BUDGET_RETRY_PERIOD", "2s", "How often replicas try to take or renew the Lease. The leader answers agents only while its last renewal is at most two retry periods old, so that the next leader knows when its grants ended."},
		false, func(s *Settings, v string) error { return duration(&s.RetryPeriod, v) }},
	{Setting{"VPCNET_BUDGET_MARGIN", "0.9", "Share of each EC2 bucket's refill and burst granted to the agents, above 0 and at most 1; the rest is left to the account's other clients."},
		false, func(s *Settings, v string) error {
			m, err := strconv.ParseFloat(v, 64)
			if err != nil || !(m > 0 && m <= 1) {
				return errors.New("must be a number above 0 and at most 1, such as 0.9")
			}
			s.Budget.Margin = m
			return nil
		}},
	{Setting{"VPCNET_BUDGET_BUCKETS", "", "The account's EC2 request buckets where they differ from EC2's defaults (raised limits), as comma-separated ACTION=BURST/REFILL, such as CreateNetworkInterface=200/10,DescribeNetworkInterfaces=100/20; the action default sets every action not listed."},
		false, func(s *Settings, v string) error { return buckets(&s.Budget, v) }},
	{Setting{"VPCNET_BUDGET_CLIENTS", "system:serviceaccount:kube-system:vpcnet", "Comma-separated usernames allowed to reserve EC2 calls, as the API server's TokenReview names them: the agents' service account."},
		false, func(s *Settings, v string) error {
			s.Clients = nil
			for item := range strings.SplitSeq(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					s.Clients = append(s.Clients, item)
				}
			}
			if len(s.Clients) == 0 {
				return errors.New("must name at least one username, such as system:serviceaccount:kube-system:vpcnet")
			}
			return nil
		}},
	{Setting{"VPCNET_BUDGET_KUBECONFIG", "", "Kubeconfig file for the Kubernetes API; empty means the pod's service account."},
		false, func(s *Settings, v string) error { s.Kubeconfig = v; return nil }},
}

// Variables lists the controller's variables, in order.
func Variables() []Setting {
	out := make([]Setting, len(settings))
	for i, s := range settings {
		out[i] = s.Setting
	}
	return out
}

// Load reads the settings from environ ("NAME=value", as os.Environ
// returns). Every bad value is reported, one line each naming the
// variable, its value and what is allowed; so is a VPCNET_BUDGET_
// variable that is no setting (a misspelt one would otherwise be ignored).
func Load(environ []string) (Settings, error) {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	s := Settings{Budget: budget.DefaultConfig()}
	var problems []string
	known := map[string]bool{}
	for _, st := range settings {
		known[st.Name] = true
		v, ok := vars[st.Name]
		if !ok || v == "" {
			v = st.Default
		}
		if v == "" && st.required {
			problems = append(problems, fmt.Sprintf("%s is not set: %s", st.Name, st.Meaning))
			continue
		}
		if err := st.set(&s, v); err != nil {
			problems = append(problems, fmt.Sprintf("%s=%q: %v", st.Name, v, err))
		}
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VPCNET_BUDGET_") && !known[name] && !serviceLink.MatchString(name) {
			problems = append(problems, fmt.Sprintf("%s: not a vpcnet-budget setting (docs/settings.md lists them)", name))
		}
	}
	if len(problems) == 0 {
		if err := s.check(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return s, errors.New(strings.Join(problems, "\n"))
	}
	return s, nil
}

// check is what only the settings together can say.
func (s Settings) check() error {
	if s.LeaseDuration <= s.RenewDeadline {
		return fmt.Errorf("VPCNET_BUDGET_LEASE_DURATION=%s must be longer than VPCNET_BUDGET_RENEW_DEADLINE=%s", s.LeaseDuration, s.RenewDeadline)
	}
	if float64(s.RenewDeadline) <= 1.2*float64(s.RetryPeriod) {
		return fmt.Errorf("VPCNET_BUDGET_RENEW_DEADLINE=%s must be longer than 1.2 × VPCNET_BUDGET_RETRY_PERIOD=%s", s.RenewDeadline, s.RetryPeriod)
	}
	return s.Budget.Validate()
}

// minHorizon is the shortest grant horizon: shorter, and most of a
// join's requests would come back twice.
const minHorizon = time.Second

// callSlack is how long after its slot a granted job may still be
// making its calls: one after another, each a round trip to EC2.
const callSlack = time.Second

// Horizon is how far ahead of now the leader grants calls
// (budget.Config.Horizon); fresh how long after its last renewal of the
// Lease the leader still grants (two retry periods: one renewal may be
// slow); and credit how long before its own term starts a new leader
// may take the buckets as empty (negative: how long after).
//
// A leader grants only while its last renewal is at most fresh old, so
// its grants have all been made by fresh + horizon after that renewal,
// crashed or cut off from the API server. A standby takes the Lease
// over no sooner than LeaseDuration after it saw that renewal: the
// buckets have refilled, untouched by the last leader, for LeaseDuration
// − fresh − horizon − callSlack (7 s with the defaults) when the next
// term starts, and the new leader may count that refill, instead of
// losing it and more to the takeover. Run counts it from when the
// standby first read that renewal (termOffset): credit or more before
// the term, by the standby's retry jitter past the Lease's expiry.
func (s Settings) Horizon() (horizon, fresh, credit time.Duration) {
	fresh = 2 * s.RetryPeriod
	horizon = max(s.LeaseDuration-s.RenewDeadline-s.RetryPeriod, minHorizon)
	return horizon, fresh, s.LeaseDuration - fresh - horizon - callSlack
}

// Endpoint is the address agents reach this replica on.
func (s Settings) Endpoint() string {
	return net.JoinHostPort(s.PodIP.String(), strconv.Itoa(s.Port))
}

func duration(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 100*time.Millisecond || d > time.Hour {
		return errors.New("must be a duration from 100ms to 1h, such as 15s")
	}
	*dst = d
	return nil
}

// buckets reads ACTION=BURST/REFILL,... over the defaults.
func buckets(c *budget.Config, v string) error {
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		action, spec, ok := strings.Cut(item, "=")
		burstS, refillS, ok2 := strings.Cut(spec, "/")
		if !ok || !ok2 {
			return fmt.Errorf("%q is not ACTION=BURST/REFILL, such as CreateNetworkInterface=200/10", item)
		}
		burst, err1 := strconv.Atoi(burstS)
		refill, err2 := strconv.ParseFloat(refillS, 64)
		if err1 != nil || err2 != nil || burst < 1 || !(refill > 0) || refill > 1e6 {
			return fmt.Errorf("%q: the burst must be a whole number of at least 1 and the refill a number of calls per second above 0", item)
		}
		b := budget.Bucket{Burst: burst, Refill: refill}
		if action == "default" {
			c.Default = b
			continue
		}
		if !budget.ValidAction(action) {
			return fmt.Errorf("%q: %q is not an EC2 action name (such as CreateNetworkInterface) or default", item, action)
		}
		if c.Buckets == nil {
			c.Buckets = map[string]budget.Bucket{}
		}
		c.Buckets[action] = b
	}
	return nil
}

// dnsSubdomain is Kubernetes' rule for most object names.
func dnsSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' && c != '.' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// serviceLink matches the variables the kubelet injects for each Service
// in the pod's namespace (a Service named vpcnet-budget-x would give
// VPCNET_BUDGET_X_SERVICE_HOST): not the operator's mistake.
var serviceLink = regexp.MustCompile(`^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)
