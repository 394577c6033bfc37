package controller

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/budget"
)

// downward is what the Deployment's downward API sets.
var downward = []string{"POD_NAME=vpcnet-budget-7d9f-abcde", "POD_NAMESPACE=kube-system", "POD_IP=10.0.1.17"}

func TestLoadDefaults(t *testing.T) {
	s, err := Load(downward)
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != 61680 || s.Lease != "vpcnet-budget" || s.Namespace != "kube-system" || s.Pod != "vpcnet-budget-7d9f-abcde" ||
		s.PodIP != netip.MustParseAddr("10.0.1.17") || s.Endpoint() != "10.0.1.17:61680" {
		t.Errorf("settings %+v", s)
	}
	if s.LeaseDuration != 15*time.Second || s.RenewDeadline != 10*time.Second || s.RetryPeriod != 2*time.Second {
		t.Errorf("election timings %v %v %v, want client-go's usual 15s 10s 2s", s.LeaseDuration, s.RenewDeadline, s.RetryPeriod)
	}
	if len(s.Clients) != 1 || s.Clients[0] != "system:serviceaccount:kube-system:vpcnet" {
		t.Errorf("clients %q, want the agent's service account", s.Clients)
	}
	def := budget.DefaultConfig()
	if s.Budget.Margin != def.Margin || s.Budget.Buckets["CreateNetworkInterface"] != def.Buckets["CreateNetworkInterface"] || s.Budget.Default != def.Default {
		t.Errorf("budget %+v, want budget.DefaultConfig()", s.Budget)
	}
}

func TestLoadOverrides(t *testing.T) {
	s, err := Load(append(downward,
		"POD_IP=fd00::17",
		"VPCNET_BUDGET_LISTEN_PORT=7000",
		"VPCNET_BUDGET_LEASE=budget.test",
		"VPCNET_BUDGET_MARGIN=0.5",
		"VPCNET_BUDGET_BUCKETS=CreateNetworkInterface=200/10, DescribeNetworkInterfaces=100/20.5,default=50/2,",
		"VPCNET_BUDGET_CLIENTS=system:serviceaccount:kube-system:vpcnet, system:serviceaccount:tools:scale",
		"VPCNET_BUDGET_LEASE_DURATION=30s", "VPCNET_BUDGET_RENEW_DEADLINE=20s", "VPCNET_BUDGET_RETRY_PERIOD=4s",
		// Injected by the kubelet for a Service named vpcnet-budget-metrics: not a setting, not a mistake.
		"VPCNET_BUDGET_METRICS_SERVICE_HOST=10.96.0.10", "VPCNET_BUDGET_METRICS_PORT_61680_TCP_ADDR=10.96.0.10",
	))
	if err != nil {
		t.Fatal(err)
	}
	if s.Endpoint() != "[fd00::17]:7000" || s.Lease != "budget.test" || s.Budget.Margin != 0.5 {
		t.Errorf("endpoint %s lease %s margin %v", s.Endpoint(), s.Lease, s.Budget.Margin)
	}
	if b := s.Budget.Buckets["CreateNetworkInterface"]; b != (budget.Bucket{Burst: 200, Refill: 10}) {
		t.Errorf("CreateNetworkInterface bucket %+v", b)
	}
	if b := s.Budget.Buckets["DescribeNetworkInterfaces"]; b != (budget.Bucket{Burst: 100, Refill: 20.5}) {
		t.Errorf("DescribeNetworkInterfaces bucket %+v", b)
	}
	if s.Budget.Default != (budget.Bucket{Burst: 50, Refill: 2}) {
		t.Errorf("default bucket %+v", s.Budget.Default)
	}
	if s.Budget.Buckets["AttachNetworkInterface"] != budget.DefaultConfig().Buckets["AttachNetworkInterface"] {
		t.Error("an action not listed lost its default bucket")
	}
	if len(s.Clients) != 2 || s.Clients[1] != "system:serviceaccount:tools:scale" {
		t.Errorf("clients %q", s.Clients)
	}
	if s.LeaseDuration != 30*time.Second || s.RenewDeadline != 20*time.Second || s.RetryPeriod != 4*time.Second {
		t.Errorf("timings %v %v %v", s.LeaseDuration, s.RenewDeadline, s.RetryPeriod)
	}
}

// TestLoadRefusesEachBadValueOnItsOwnLine: every bad variable is named
// with its value and what is allowed, one line each, all at once.
func TestLoadRefusesEachBadValueOnItsOwnLine(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"POD_NAME="}, "POD_NAME is not set"},
		{[]string{"POD_IP=node-1"}, `POD_IP="node-1": must be an IP address`},
		{[]string{"VPCNET_BUDGET_LISTEN_PORT=0"}, `VPCNET_BUDGET_LISTEN_PORT="0": must be a port number`},
		{[]string{"VPCNET_BUDGET_LISTEN_PORT=http"}, `VPCNET_BUDGET_LISTEN_PORT="http": must be a port number`},
		{[]string{"VPCNET_BUDGET_LEASE=Budget_Lease"}, `VPCNET_BUDGET_LEASE="Budget_Lease": must be a Kubernetes object name`},
		{[]string{"VPCNET_BUDGET_LEASE=kube-system/vpcnet-budget"}, `VPCNET_BUDGET_LEASE="kube-system/vpcnet-budget"`},
		{[]string{"VPCNET_BUDGET_MARGIN=1.5"}, `VPCNET_BUDGET_MARGIN="1.5": must be a number above 0 and at most 1`},
		{[]string{"VPCNET_BUDGET_MARGIN=0"}, `VPCNET_BUDGET_MARGIN="0"`},
		{[]string{"VPCNET_BUDGET_MARGIN=NaN"}, `VPCNET_BUDGET_MARGIN="NaN"`},
		{[]string{"VPCNET_BUDGET_BUCKETS=CreateNetworkInterface=100"}, `is not ACTION=BURST/REFILL`},
		{[]string{"VPCNET_BUDGET_BUCKETS=CreateNetworkInterface=0/5"}, `the burst must be a whole number of at least 1`},
		{[]string{"VPCNET_BUDGET_BUCKETS=CreateNetworkInterface=100/-5"}, `refill a number of calls per second above 0`},
		{[]string{"VPCNET_BUDGET_BUCKETS=create-eni=100/5"}, `"create-eni" is not an EC2 action name`},
		{[]string{"VPCNET_BUDGET_CLIENTS= , "}, `VPCNET_BUDGET_CLIENTS=" , ": must name at least one username`},
		{[]string{"VPCNET_BUDGET_LEASE_DURATION=15"}, `VPCNET_BUDGET_LEASE_DURATION="15": must be a duration`},
		{[]string{"VPCNET_BUDGET_LEASE_DURATION=5s"}, `VPCNET_BUDGET_LEASE_DURATION=5s must be longer than VPCNET_BUDGET_RENEW_DEADLINE=10s`},
		{[]string{"VPCNET_BUDGET_RETRY_PERIOD=9s"}, `VPCNET_BUDGET_RENEW_DEADLINE=10s must be longer than 1.2 × VPCNET_BUDGET_RETRY_PERIOD=9s`},
		{[]string{"VPCNET_BUDGET_MARGN=0.5"}, `VPCNET_BUDGET_MARGN: not a vpcnet-budget setting`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Load(append(append([]string(nil), downward...), tt.env...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load(%q) = %v, want an error saying %q", tt.env, err, tt.want)
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != 1 {
				t.Errorf("%d lines for one bad value:\n%v", lines, err)
			}
		})
	}
	_, err := Load([]string{"POD_IP=x", "VPCNET_BUDGET_MARGIN=2"})
	if err == nil || strings.Count(err.Error(), "\n")+1 != 4 {
		t.Errorf("four bad settings (POD_NAME, POD_NAMESPACE, POD_IP, VPCNET_BUDGET_MARGIN) gave:\n%v", err)
	}
}

func TestVariablesAreDocumented(t *testing.T) {
	for _, v := range Variables() {
		if v.Meaning == "" || !strings.HasSuffix(v.Meaning, ".") {
			t.Errorf("%s: meaning %q, want a sentence", v.Name, v.Meaning)
		}
	}
}

// The leader grants no further ahead than the horizon and only while
// its last renewal is fresh; a standby takes over no sooner than the
// Lease's duration after that renewal, and counts the refill since the
// last grant could have been made (credit), no more.
func TestTheGrantHorizonEndsBeforeTheNextTermCanStart(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry    time.Duration
		horizon, fresh, credit time.Duration
	}{
		{15 * time.Second, 10 * time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 7 * time.Second},
		{60 * time.Second, 40 * time.Second, 5 * time.Second, 15 * time.Second, 10 * time.Second, 34 * time.Second},
		{15 * time.Second, 12 * time.Second, 2 * time.Second, time.Second, 4 * time.Second, 9 * time.Second},
		{4 * time.Second, 3 * time.Second, 1500 * time.Millisecond, time.Second, 3 * time.Second, -time.Second},
		{4 * time.Second, 3500 * time.Millisecond, 2500 * time.Millisecond, time.Second, 5 * time.Second, -3 * time.Second},
	} {
		s := Settings{LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
		h, f, c := s.Horizon()
		if h != tc.horizon || f != tc.fresh || c != tc.credit {
			t.Errorf("lease %v, renew deadline %v, retry %v: horizon %v, fresh %v, credit %v; want %v, %v, %v", tc.lease, tc.renew, tc.retry, h, f, c, tc.horizon, tc.fresh, tc.credit)
		}
		// A leader whose last renewal was at 0 makes its last call by
		// fresh+horizon (+ the calls' own time); the next term starts
		// at lease at the soonest and takes the buckets as empty from
		// lease-credit.
		if last := f + h + callSlack; last > tc.lease-c {
			t.Errorf("lease %v, renew deadline %v, retry %v: the last grant runs at %v, after the next term's buckets start empty at %v", tc.lease, tc.renew, tc.retry, last, tc.lease-c)
		}
	}
}
