package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// refusal is a setting of the Amazon VPC CNI (aws-node) that vpcnet does
// not implement. vpcnet behaves as aws-node does with the values accepts
// allows (its default, and values that mean the same); any other value
// asks for behaviour vpcnet lacks, so the agent refuses to start rather
// than run without it. A cluster switching over with aws-node's own
// manifest, which sets most of these to their defaults, still starts.
//
// The list comes from aws-node's README ("CNI Configuration Variables")
// and the variables its code reads (pkg/ipamd, pkg/networkutils,
// pkg/awsutils); settings vpcnet implements are in the settings table
// instead.
type refusal struct {
	name     string
	accepted string // the values accepted, as the docs show them
	accepts  func(string) bool
	instead  string // what to do instead, one sentence
}

// Refusal is one Amazon VPC CNI setting vpcnet does not implement, as the
// docs show it.
type Refusal struct {
	Name     string
	Accepted string // values that start the agent
	Instead  string // what to do instead
}

func isBool(want bool) func(string) bool {
	return func(v string) bool {
		b, err := strconv.ParseBool(v)
		return err == nil && b == want
	}
}

func anyBool(v string) bool {
	_, err := strconv.ParseBool(v)
	return err == nil
}

func literal(values ...string) func(string) bool {
	return func(v string) bool { return slices.Contains(values, v) }
}

func foldedLiteral(values ...string) func(string) bool {
	return func(v string) bool {
		return slices.ContainsFunc(values, func(s string) bool { return strings.EqualFold(s, v) })
	}
}

// never accepts no value: the variable must be unset or empty.
func never(string) bool { return false }

var refusals = []refusal{
	{"AWS_VPC_CNI_NODE_PORT_SUPPORT", "`true`", isBool(true),
		"vpcnet always routes NodePort replies back through the primary interface; remove it"},
	{"HOST_CNI_BIN_PATH", "`/host/opt/cni/bin`", literal("/host/opt/cni/bin"),
		"remove it and give the install-cni init container's vpcnet-install `-to` the directory instead"},
	{"HOST_CNI_CONFDIR_PATH", "`/host/etc/cni/net.d`", literal("/host/etc/cni/net.d"),
		"use VPCNET_CNI_CONF_DIR (the directory as the agent's container sees it) instead"},
	{"AWS_VPC_K8S_CNI_LOG_FILE", "`/host/var/log/aws-routed-eni/ipamd.log`, `stdout`, `stderr`",
		literal("/host/var/log/aws-routed-eni/ipamd.log", "stdout", "stderr"),
		"vpcnetd logs JSON to stderr only (kubectl logs); remove it and collect the container's log"},
	{"AWS_VPC_K8S_PLUGIN_LOG_FILE", "`/var/log/aws-routed-eni/plugin.log`, `stderr`",
		literal("/var/log/aws-routed-eni/plugin.log", "stderr"),
		"the vpcnet plugin logs its warnings and errors to the container runtime's log (stderr), not to a file; remove it"},
	{"AWS_VPC_K8S_PLUGIN_LOG_LEVEL", "`DEBUG`", foldedLiteral("DEBUG"),
		"the vpcnet plugin logs warnings and errors only, to the container runtime's log; remove it (AWS_VPC_K8S_CNI_LOGLEVEL sets vpcnetd's level)"},
	{"AWS_VPC_K8S_CNI_CONFIGURE_RPFILTER", "`true`, `false` (a no-op in aws-node too)", anyBool,
		"vpcnetd sets the primary interface's rp_filter itself; remove it"},
	{"AWS_VPC_K8S_CNI_CONNMARK", "`0x80`, `128`", literal("0x80", "128"),
		"vpcnet marks connections from the primary interface with 0x80; remove it and keep that bit free in other rules"},
	{"AWS_VPC_K8S_CNI_BACKING_STORE", "`/var/run/aws-node/ipam.json`", literal("/var/run/aws-node/ipam.json"),
		"use VPCNET_AWS_VPC_CNI_CHECKPOINT for where aws-node's checkpoint lies, and VPCNET_STATE_DIR for vpcnet's own"},
	{"CLUSTER_ENDPOINT", "(empty)", never,
		"vpcnetd reaches the API server through KUBERNETES_SERVICE_HOST; to bypass kube-proxy write a kubeconfig with that server and set VPCNET_KUBECONFIG"},
	{"AWS_EC2_ENDPOINT", "(empty)", never,
		"use VPCNET_EC2_ENDPOINT instead"},
	{"HTTP_TIMEOUT", "(empty)", never,
		"use VPCNET_EC2_CALL_TIMEOUT (a duration such as 10s) instead"},
	{"POD_SECURITY_GROUP_ENFORCING_MODE", "`strict`, `standard` (no effect without ENABLE_POD_ENI)", literal("strict", "standard"),
		"vpcnet does not provide security groups for pods; remove it"},
	{"DISABLE_TCP_EARLY_DEMUX", "`false`", isBool(false),
		"vpcnet does not change net.ipv4.tcp_early_demux (it has no security groups for pods); set the sysctl in the node's bootstrap if you need it"},
	{"DISABLE_NETWORK_RESOURCE_PROVISIONING", "`false`", isBool(false),
		"vpcnet attaches ENIs and assigns addresses itself; to bound what it attaches set MAX_ENI and the warm targets instead"},
	{"ENABLE_IMDS_ONLY_MODE", "`false`", isBool(false),
		"vpcnet needs the EC2 API (deploy/iam-policy.json lists the actions); grant them, through a VPC endpoint with VPCNET_EC2_ENDPOINT if EC2 is not otherwise reachable"},
	{"ANNOTATE_POD_IP", "`false`", isBool(false),
		"vpcnet does not annotate pods with their address; policy engines must read the pod's status.podIPs"},
	{"ENABLE_NFTABLES", "`true`, `false` (a no-op in aws-node too)", anyBool,
		"vpcnet always programs nftables, in its own table; remove it"},
	{"AWS_EXTERNAL_SERVICE_CIDRS", "(empty)", never,
		"vpcnet has no per-CIDR main-table rules: pod traffic leaving the VPC already follows the main table out of the primary interface, unless AWS_VPC_K8S_CNI_EXTERNALSNAT or AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS covers it; remove it"},
	{"ENABLE_V6_EGRESS", "`false`", isBool(false),
		"vpcnet gives pods no IPv6 egress; remove it"},
	{"DISABLE_POD_V6", "`false`", isBool(false),
		"vpcnet does not chain the tuning plugin that disables IPv6 in pods; remove it and set net.ipv6.conf.all.disable_ipv6=1 in the pod's securityContext.sysctls (an unsafe sysctl: allow it with the kubelet's --allowed-unsafe-sysctls)"},
	{"ENABLE_MULTI_NIC", "`false`", isBool(false),
		"vpcnet manages network card 0 only and leaves interfaces on other cards alone; remove it"},
	{"MANAGE_UNTAGGED_ENI", "`true`", isBool(true),
		"tag each ENI vpcnet must leave alone with node.k8s.amazonaws.com/no_manage=true instead"},
}

// refusedProblems checks every refused variable that is set.
func refusedProblems(lookup func(string) (string, bool)) []Problem {
	var problems []Problem
	for _, r := range refusals {
		v, ok := lookup(r.name)
		if !ok || v == "" || r.accepts(v) {
			continue
		}
		problems = append(problems, Problem{Name: r.name, Value: v,
			Allowed: "not implemented by vpcnet: " + r.instead})
	}
	return problems
}

// Refusals lists the Amazon VPC CNI settings vpcnet does not implement, in
// the order of docs/settings.md.
func Refusals() []Refusal {
	out := make([]Refusal, len(refusals))
	for i, r := range refusals {
		out[i] = Refusal{Name: r.name, Accepted: r.accepted, Instead: r.instead}
	}
	return out
}

// ownedPrefixes are the variable name prefixes vpcnet owns: a variable
// with one of them that vpcnetd does not know is a mistake (a misspelt
// WARM_IP_TARGT would otherwise be ignored), not someone else's setting.
var ownedPrefixes = []string{"VPCNET_", "WARM_", "MINIMUM_", "AWS_VPC_K8S_CNI_"}

// toolVariables are vpcnet's own variables read by its other programs
// and tests (hack/, internal/kubetest, e2e, deploy, bundle), not by
// vpcnetd; a developer's shell that sets them must still run the agent.
var toolVariables = []string{
	"VPCNET_KUBE_APISERVER", "VPCNET_ETCD", "VPCNET_KUBETEST_KEEP", "VPCNET_CACHE_DIR",
	"VPCNET_HELM", "VPCNET_E2E_LOGS", "VPCNET_BIN_DIR", "VPCNET_BUNDLE_RUNNING",
}

// serviceLink matches the variables the kubelet injects for each Service
// in the pod's namespace (enableServiceLinks, on by default): a Service
// named vpcnet-metrics gives VPCNET_METRICS_SERVICE_HOST,
// VPCNET_METRICS_PORT_61678_TCP_ADDR and so on.
var serviceLink = regexp.MustCompile(`^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// knownNames is every variable name vpcnetd reads or knows.
func knownNames() []string {
	var names []string
	for _, s := range settings {
		names = append(names, s.name)
	}
	for _, r := range refusals {
		names = append(names, r.name)
	}
	return append(names, toolVariables...)
}

// unknownProblems finds variables in environ ("NAME=value", as
// os.Environ returns) with a vpcnet-owned prefix that no setting has.
func unknownProblems(environ []string) []Problem {
	known := knownNames()
	var problems []Problem
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if slices.Contains(known, name) || serviceLink.MatchString(name) ||
			!slices.ContainsFunc(ownedPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		problems = append(problems, Problem{Name: name, Value: value,
			Allowed: fmt.Sprintf("not a vpcnetd setting; did you mean %s? (docs/settings.md lists them)", closest(name, known))})
	}
	return problems
}

// closest is the name in names with the fewest single-character edits
// from name, the first of equals.
func closest(name string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		if d := editDistance(name, n); bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// LoadEnviron is Load over a whole environment (os.Environ()): it also
// refuses variables with a vpcnet-owned prefix that are no setting.
func LoadEnviron(environ []string) (Config, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	c, err := Load(func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	unknown := unknownProblems(environ)
	if len(unknown) == 0 {
		return c, err
	}
	var problems []Problem
	if cerr := (*Error)(nil); errors.As(err, &cerr) {
		problems = cerr.Problems
	}
	return c, &Error{Problems: append(problems, unknown...)}
}
