package conformance

import (
	"regexp"
	"strings"

	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// Selection is which of the suite's tests a run is for: those Focus
// matches, less those Exclude matches (not in the report: outside what
// the selection is about), and of the rest, those a Skip matches are
// skipped with its reason, which is about the local cloud, never vpcnet.
type Selection struct {
	Name    string
	Focus   *regexp.Regexp
	Exclude *regexp.Regexp
	// Listed are tests Exclude leaves out that the report still lists,
	// each skipped with its Skip's reason (every one must match a Skip):
	// what a reader of the run looks for and should find explained, as
	// the IPv6 run's dual-stack tests.
	Listed *regexp.Regexp
	Skips  []Skip
	// Family is the IP family of the cluster the run brings up (IPv4
	// when empty), single-stack.
	Family kubecluster.Family
}

// Skip is a test the local cloud cannot run, and why.
type Skip struct {
	Pattern string
	Reason  string
}

func (s Selection) skipReason(name string) string {
	for _, k := range s.Skips {
		if regexp.MustCompile(k.Pattern).MatchString(name) {
			return k.Reason
		}
	}
	return ""
}

// GinkgoFocus and GinkgoSkip are the suite's --ginkgo.focus and
// --ginkgo.skip for the selection.
func (s Selection) GinkgoFocus() string { return s.Focus.String() }

func (s Selection) GinkgoSkip() string {
	var parts []string
	if s.Exclude != nil {
		parts = append(parts, s.Exclude.String())
	}
	for _, k := range s.Skips {
		parts = append(parts, k.Pattern)
	}
	return strings.Join(parts, "|")
}

// notSelected are tests outside what the selections are about: those that
// need the cluster to themselves or disturb it ([Serial], [Disruptive]),
// run for many minutes ([Slow]), test an optional feature vpcnet does not
// claim ([Feature:...], which kind and Calico also leave out of their
// conformance runs), or belong to a cloud provider.
var notSelected = `\[Serial\]|\[Disruptive\]|\[Slow\]|\[Feature:|\[Flaky\]|\[Experimental\]|\[Provider:|\[FeatureGate:.*\] \[Alpha\]|\[FeatureGate:.*\] \[Beta\] \[Feature:OffByDefault\]`

// localCloudSkips are the selected tests the local cloud cannot serve.
var localCloudSkips = []Skip{
	loadBalancerSkip,
	{Pattern: `IPv6|\[IPv6DualStack\]|[Dd]ual-?[Ss]tack`, Reason: "IPv6: this run's cluster is IPv4 single-stack; the IPv6 run (make conformance CONFORMANCE=ipv6, results in CONFORMANCE-ipv6.md) runs the IPv6 tests on an IPv6 cluster"},
	sctpSkip,
}

var loadBalancerSkip = Skip{Pattern: `LoadBalancer`, Reason: "needs a cloud load balancer controller (on AWS, the AWS Load Balancer Controller); the local cloud emulates no ELB"}

var sctpSkip = Skip{Pattern: `\[Feature:SCTPConnectivity\]|SCTP`, Reason: "SCTP: this machine's kernel has no sctp module"}

// Network is `make conformance`'s selection: every sig-network
// [Conformance] test, and the pod network's other non-disruptive tests
// that apply to a VPC CNI: the Services granular checks (pod, node and
// endpoint to Service, session affinity, NodePort, large requests,
// hostNetwork endpoints), kube-proxy's URLs, and HostPort.
var Network = Selection{
	Name: "network",
	Focus: regexp.MustCompile(`\[sig-network\].*\[Conformance\]` +
		`|\[sig-network\] Networking Granular Checks` +
		`|\[sig-network\] Networking should (check kube-proxy urls|provide unchanging, static URL paths)` +
		`|\[sig-network\] HostPort` +
		`|\[sig-network\] Services should (preserve source pod IP for traffic thru service cluster IP|be able to up and down services|work after the service has been recreated|check NodePort out-of-range|release NodePorts on delete|create endpoints for unready pods|be rejected when no endpoints exist|implement service.kubernetes.io/headless|serve a basic endpoint from pods)`),
	Exclude: regexp.MustCompile(notSelected),
	Skips:   localCloudSkips,
}

// CI is the bounded subset `.ci/run` runs (make conformance
// CONFORMANCE=ci): pod-to-pod and node-to-pod connectivity, ClusterIP and
// NodePort Services, DNS, and hostPort, all [Conformance].
var CI = Selection{
	Name: "ci",
	Focus: regexp.MustCompile(`\[sig-network\] Networking Granular Checks: Pods .*\[Conformance\]` +
		`|\[sig-network\] DNS should provide DNS for (the cluster|services) \[Conformance\]` +
		`|\[sig-network\] Services should serve (a basic endpoint|multiport endpoints) from pods \[Conformance\]` +
		`|\[sig-network\] Services should be able to create a functioning NodePort service \[Conformance\]` +
		`|\[sig-network\] HostPort .*\[Conformance\]`),
	Exclude: regexp.MustCompile(notSelected),
	Skips:   localCloudSkips,
}

// NetPol is `make netpol`'s selection, the judge of vpcnet's
// NetworkPolicy enforcement: every [Feature:NetworkPolicy] test of
// test/e2e/network/netpol. Its [Feature:] tag is what it is about, so
// only the cluster-disturbing and slow tags stay excluded. The tests
// that name SCTP in a policy without SCTP traffic run: they check that
// SCTP rules neither open TCP nor fail to isolate.
var NetPol = Selection{
	Name:    "netpol",
	Focus:   regexp.MustCompile(`\[Feature:NetworkPolicy\]`),
	Exclude: regexp.MustCompile(`\[Serial\]|\[Disruptive\]|\[Slow\]|\[Flaky\]`),
	Skips: []Skip{
		{Pattern: `\[Feature:SCTPConnectivity\]`, Reason: "SCTP traffic: this machine's kernel has no sctp module, so no SCTP connection can be made between pods"},
	},
}

// IPv6 is `make conformance CONFORMANCE=ipv6`'s selection: Network's
// tests on an IPv6 single-stack cluster (family.go in kubecluster: Services,
// kubelets, kube-proxy and CoreDNS in IPv6, vpcnet in aws-node's IPv6
// mode on a dual-stack VPC), where the suite sees the kubernetes
// Service's IPv6 address and tests in IPv6 (its ClusterIsIPv6). The
// suite's IPv6 feature tests are listed: none applies to the local cloud.
var IPv6 = Selection{
	Name:    "ipv6",
	Focus:   Network.Focus,
	Exclude: regexp.MustCompile(notSelected),
	Listed:  regexp.MustCompile(`\[Feature:IPv6DualStack\]|\[Feature:Networking-IPv6\]`),
	Skips: []Skip{
		loadBalancerSkip,
		{Pattern: `\[Feature:IPv6DualStack\]|[Dd]ual-?[Ss]tack`, Reason: "dual-stack: the local cloud's IPv6 cluster is single-stack IPv6, as an EKS IPv6 cluster is (its VPC is dual-stack, its Services and pods are not)"},
		{Pattern: `\[Feature:Networking-IPv6\]`, Reason: "Internet: the local cloud has none; its internet namespace answers at 2001:db8:100::10, not at 2001:4860:4860::8888 (Google's public DNS), which the test connects to"},
		sctpSkip,
	},
	Family: kubecluster.IPv6,
}

// NetPolIPv6 is `make netpol-ipv6`'s selection: NetPol's tests on the
// IPv6 single-stack cluster (as IPv6's), with vpcnet enforcing in aws-node's
// IPv6 mode. The suite probes pods over IPv6 there, and its ipBlock
// tests name the pods' IPv6 addresses.
var NetPolIPv6 = Selection{
	Name:    "netpol-ipv6",
	Focus:   NetPol.Focus,
	Exclude: NetPol.Exclude,
	Skips:   NetPol.Skips,
	Family:  kubecluster.IPv6,
}

// Selections by name, for CONFORMANCE=NAME.
var Selections = map[string]Selection{Network.Name: Network, CI.Name: CI, NetPol.Name: NetPol, IPv6.Name: IPv6, NetPolIPv6.Name: NetPolIPv6}
