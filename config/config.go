// Package config is the one place that reads the agent's settings. Each
// setting is an environment variable; where the Amazon VPC CNI has the
// same setting, it has the same name and meaning, so a cluster can switch
// over with its manifests unchanged. The rest are named VPCNET_*.
//
// Load takes a lookup function rather than reading the environment itself
// (main passes os.Environ to LoadEnviron), and checks every setting before
// it returns: one error lists each invalid variable, its value and what is
// allowed. Amazon VPC CNI settings vpcnet does not implement are refused
// when set to a value that asks for what vpcnet lacks (refused.go), and so
// are unknown variables with a prefix vpcnet owns.
// docs/settings.md is generated from the same table (go generate ./config).
package config

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/verdicts"
)

//go:generate go test -run ^TestSettingsDocIsUpToDate$ -update

// Config is the agent's effective settings.
type Config struct {
	// Warm pool and limits.
	WarmENITarget    int
	WarmIPTarget     int // 0: unset
	MinimumIPTarget  int // 0: unset
	WarmPrefixTarget int // 0: unset
	MaxENI           int // -1: the instance type's limit
	// MaxPods is MAX_PODS; 0: the kubelet's, else the EKS rule.
	MaxPods          int
	PrefixDelegation bool
	// IPv4 and IPv6 are ENABLE_IPv4 and ENABLE_IPv6: which family pods
	// get, exactly one of them (crossCheck). IPv6 is aws-node's IPv6 mode:
	// one /80 prefix on the primary ENI, no warm pool.
	IPv4, IPv6 bool
	// V4Egress is ENABLE_V4_EGRESS: IPv4 egress for IPv6 pods, by the
	// vpcnet-egress-v4 plugin the agent chains after vpcnet's.
	V4Egress bool
	// SubnetDiscovery is ENABLE_SUBNET_DISCOVERY: tagged subnets for new
	// ENIs.
	SubnetDiscovery bool
	// ManageENIsNonSchedulable is AWS_MANAGE_ENIS_NON_SCHEDULABLE: false
	// holds the pool while the node is cordoned.
	ManageENIsNonSchedulable bool
	// Cooldown is how long a freed address rests before another pod gets
	// it, so stale routes elsewhere cannot misdeliver.
	Cooldown time.Duration
	// ENIGrace is how long a newly attached ENI is kept even when surplus.
	ENIGrace time.Duration

	// ENIConfig selection (custom networking).
	CustomNetwork       bool
	ENIConfigLabel      string
	ENIConfigAnnotation string

	// Host dataplane.
	ExternalSNAT     bool
	ExcludeSNATCIDRs []netip.Prefix
	RandomizeSNAT    string // "prng", "hashrandom" or "none"
	ENIMTU           int
	PodMTU           int
	VethPrefix       string
	// BandwidthPlugin is ENABLE_BANDWIDTH_PLUGIN: the CNI configuration
	// chains the bandwidth plugin.
	BandwidthPlugin bool
	// PodIMDS is VPCNET_POD_IMDS: "allow" or "deny" pods' packets to
	// the instance metadata service.
	PodIMDS string

	// NetworkPolicy enforcement. NetworkPolicy is VPCNET_NETWORK_POLICY:
	// false when another engine enforces policy (chained). Mode is
	// NETWORK_POLICY_ENFORCING_MODE: how a pod whose policies are not
	// known yet starts.
	NetworkPolicy     bool
	NetworkPolicyMode verdicts.Mode
	// NetworkPolicyLogDrops logs dropped connections (kernel log).
	NetworkPolicyLogDrops bool

	// Identity and tagging.
	NodeName          string
	ClusterName       string
	AdditionalENITags map[string]string
	StartupTaint      string // taint key removed once ready; empty: none
	// Kubeconfig is a kubeconfig path; empty means in-cluster when
	// KUBERNETES_SERVICE_HOST is set, else no Kubernetes.
	Kubeconfig string
	// BudgetLease is the budget controller's Lease, "NAMESPACE/NAME";
	// empty: no controller, every node on its own EC2 budget.
	BudgetLease string

	// Leaked ENI collection.
	DisableLeakedENICleanup bool
	LeakedENIGrace          time.Duration

	// Serving.
	LogLevel             slog.Level
	DisableIntrospection bool
	IntrospectionAddr    string // host:port or unix:/path
	DisableMetrics       bool
	MetricsAddr          string
	Socket               string

	// Files.
	StateDir    string
	CNIConfDir  string
	CNIConfName string
	// CNIBinDir is where the runtime finds the plugins; only reported,
	// for doctor and the support bundle.
	CNIBinDir        string
	NetworkName      string
	AWSCNICheckpoint string
	// EgressV4IPAMDir is host-local's data directory in the IPv4 egress
	// plugin's entry (VPCNET_EGRESS_V4_IPAM_DIR).
	EgressV4IPAMDir string

	// Cloud.
	EC2Endpoint    string // empty: the SDK's endpoint for the region
	IMDSEndpoint   string // empty: the SDK's default
	EC2CallTimeout time.Duration
	AddWait        time.Duration
	DemandMemory   time.Duration
	// DetachHold is how long the pool must have had no use for an ENI
	// before it is detached.
	DetachHold        time.Duration
	ReclaimAfter      time.Duration
	ReconcileInterval time.Duration
}

// CheckpointPath is the file where the agent records who holds which
// address.
func (c Config) CheckpointPath() string { return filepath.Join(c.StateDir, "checkpoint.json") }

// HostPortPath is the file where the agent records the pods' hostPorts,
// from which it rewrites their rules after a restart.
func (c Config) HostPortPath() string { return filepath.Join(c.StateDir, "hostports.json") }

// PreflightPath is the file where the agent records an IAM preflight
// that found every permission, so that a restart need not probe again.
func (c Config) PreflightPath() string { return filepath.Join(c.StateDir, "preflight.json") }

// CNIConfPath is the CNI configuration file the agent writes when ready.
func (c Config) CNIConfPath() string { return filepath.Join(c.CNIConfDir, c.CNIConfName) }

// Setting is one setting as the operator sees it.
type Setting struct {
	Name    string // environment variable
	Value   string // effective value
	Default string
	Meaning string
}

// Problem is one invalid setting.
type Problem struct {
	Name    string
	Value   string
	Allowed string // what the value must be
}

func (p Problem) String() string { return fmt.Sprintf("%s=%q: %s", p.Name, p.Value, p.Allowed) }

// Error lists every invalid setting found by Load.
type Error struct {
	Problems []Problem
}

// Error is one line, because that is what an operator reads in
// `kubectl logs` of a crash-looping pod.
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid settings: " + strings.Join(parts, "; ")
}

// Load reads every setting through lookup, which reports whether a
// variable is set (os.LookupEnv). An empty value counts as unset, as in a
// Kubernetes manifest's `value: ""`. On error the returned *Error names
// every invalid variable.
func Load(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	var problems []Problem
	given := map[string]string{} // the variables set, with their values
	for _, s := range settings {
		v, ok := lookup(s.name)
		if ok && v != "" {
			given[s.name] = v
		} else {
			v = s.def
		}
		if err := s.set(&c, v); err != nil {
			if _, ok := given[s.name]; !ok {
				panic(fmt.Sprintf("config: default %q of %s is invalid: %v", s.def, s.name, err))
			}
			problems = append(problems, Problem{Name: s.name, Value: v, Allowed: err.Error()})
		}
	}
	problems = append(problems, refusedProblems(lookup)...)
	problems = append(problems, crossCheck(&c, given)...)
	if len(problems) > 0 {
		return c, &Error{Problems: problems}
	}
	return c, nil
}

// crossCheck fills in and validates settings that depend on others.
func crossCheck(c *Config, given map[string]string) []Problem {
	var problems []Problem
	if c.PodMTU == 0 {
		c.PodMTU = c.ENIMTU
	} else if c.ENIMTU != 0 && c.PodMTU > c.ENIMTU {
		problems = append(problems, Problem{"POD_MTU", given["POD_MTU"],
			fmt.Sprintf("must not exceed AWS_VPC_ENI_MTU (%d): larger packets would be dropped leaving the node", c.ENIMTU)})
	}
	// Strict asks that a pod start isolated; with enforcement off no pod
	// is ever isolated, so the setting would be silently ignored.
	if !c.NetworkPolicy && c.NetworkPolicyMode == verdicts.Strict {
		problems = append(problems, Problem{"NETWORK_POLICY_ENFORCING_MODE", given["NETWORK_POLICY_ENFORCING_MODE"],
			"must be standard (or unset) with VPCNET_NETWORK_POLICY=off: vpcnet then isolates no pod, so strict would be ignored; remove it, or turn enforcement on"})
	}
	problems = append(problems, familyProblems(c, given)...)
	return problems
}

// familyProblems checks ENABLE_IPv4 and ENABLE_IPv6 against each other and
// against the settings aws-node also refuses in IPv6 mode (ipamd's
// isConfigValid, v1.23): dual stack, neither family, IPv6 without prefix
// delegation, IPv6 with custom networking. Each problem names the
// setting to change, so the one line says the fix.
func familyProblems(c *Config, given map[string]string) []Problem {
	for _, name := range []string{"ENABLE_IPv4", "ENABLE_IPv6", "ENABLE_PREFIX_DELEGATION", "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"} {
		if v, ok := given[name]; ok {
			if _, err := strconv.ParseBool(v); err != nil {
				return nil // its own problem says so; the rest would guess
			}
		}
	}
	value := func(name string, v bool) string {
		if g, ok := given[name]; ok {
			return g
		}
		return fmt.Sprint(v)
	}
	switch {
	case c.IPv6 && c.IPv4:
		return []Problem{{"ENABLE_IPv4", value("ENABLE_IPv4", c.IPv4),
			"must be false with ENABLE_IPv6=true: pods get IPv4 or IPv6 addresses, not both (the Amazon VPC CNI has no dual stack either); set ENABLE_IPv4=false"}}
	case !c.IPv6 && !c.IPv4:
		return []Problem{{"ENABLE_IPv4", value("ENABLE_IPv4", c.IPv4),
			"must be true unless ENABLE_IPv6=true: pods need one address family; set ENABLE_IPv4=true, or ENABLE_IPv6=true for IPv6 pods"}}
	case !c.IPv6:
		return nil
	}
	var problems []Problem
	if !c.PrefixDelegation {
		problems = append(problems, Problem{"ENABLE_PREFIX_DELEGATION", value("ENABLE_PREFIX_DELEGATION", c.PrefixDelegation),
			"must be true with ENABLE_IPv6=true: IPv6 pods take their addresses from a /80 prefix on the primary ENI, as in the Amazon VPC CNI; set ENABLE_PREFIX_DELEGATION=true"})
	}
	if c.CustomNetwork {
		problems = append(problems, Problem{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", value("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", c.CustomNetwork),
			"must be false with ENABLE_IPv6=true: IPv6 pods use the primary ENI's /80 prefix, never an ENIConfig's subnet (the Amazon VPC CNI refuses it too); set it to false"})
	}
	return problems
}

// Settings lists every setting with its effective value, in the order of
// docs/settings.md.
func (c Config) Settings() []Setting {
	out := make([]Setting, len(settings))
	for i, s := range settings {
		def := s.def
		if s.docDef != "" {
			def = s.docDef
		}
		out[i] = Setting{Name: s.name, Value: s.get(&c), Default: def, Meaning: s.meaning}
	}
	return out
}
