package config

import (
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/verdicts"
)

// env is a lookup over a fixed set of variables.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestLoadDefaultsMatchTheAmazonVPCCNIAndTheDesign(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		WarmENITarget:       1,
		MaxENI:              -1,
		SubnetDiscovery:     true, // aws-node v1.18+
		IPv4:                true, // aws-node's manifest; its binary says false
		V4Egress:            true,
		Cooldown:            30 * time.Second,
		ENIGrace:            time.Minute,
		ENIConfigLabel:      "topology.kubernetes.io/zone",
		ENIConfigAnnotation: "k8s.amazonaws.com/eniConfig",
		RandomizeSNAT:       "prng",
		ENIMTU:              9001,
		PodMTU:              9001,
		VethPrefix:          "eni",
		PodIMDS:             "allow",
		NetworkPolicy:       true,
		NetworkPolicyMode:   verdicts.Standard,
		AdditionalENITags:   map[string]string{},
		LeakedENIGrace:      10 * time.Minute,
		LogLevel:            slog.LevelInfo,
		IntrospectionAddr:   "127.0.0.1:61679",
		MetricsAddr:         ":61678",
		Socket:              "/run/vpcnet/vpcnetd.sock",
		StateDir:            "/var/lib/vpcnet",
		CNIConfDir:          "/etc/cni/net.d",
		CNIConfName:         "10-vpcnet.conflist",
		CNIBinDir:           "/opt/cni/bin",
		NetworkName:         "aws-cni",
		AWSCNICheckpoint:    "/var/run/aws-node/ipam.json",
		EgressV4IPAMDir:     "/run/cni/v6pd/egress-v4-ipam", // aws-node's
		EC2CallTimeout:      10 * time.Second,
		AddWait:             time.Minute,
		DemandMemory:        time.Minute,
		DetachHold:          5 * time.Minute,
		ReclaimAfter:        2 * time.Minute,
		ReconcileInterval:   time.Minute,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if got := c.CheckpointPath(); got != "/var/lib/vpcnet/checkpoint.json" {
		t.Errorf("CheckpointPath = %s", got)
	}
	if got := c.CNIConfPath(); got != "/etc/cni/net.d/10-vpcnet.conflist" {
		t.Errorf("CNIConfPath = %s", got)
	}
}

func TestLoadReadsValidValues(t *testing.T) {
	tests := []struct {
		vars  map[string]string
		check func(Config) bool
	}{
		{map[string]string{"WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "30"}, func(c Config) bool { return c.WarmIPTarget == 5 && c.MinimumIPTarget == 30 }},
		{map[string]string{"MAX_ENI": "4"}, func(c Config) bool { return c.MaxENI == 4 }},
		{map[string]string{"MAX_ENI": "0"}, func(c Config) bool { return c.MaxENI == -1 }},
		{map[string]string{"MAX_ENI": "-7"}, func(c Config) bool { return c.MaxENI == -1 }},
		{map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"}, func(c Config) bool { return c.PrefixDelegation && c.WarmPrefixTarget == 1 }},
		{map[string]string{"AWS_VPC_K8S_CNI_EXTERNALSNAT": "1"}, func(c Config) bool { return c.ExternalSNAT }},
		{map[string]string{"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": "10.0.0.0/8, 172.16.5.9/12,"}, func(c Config) bool {
			return reflect.DeepEqual(c.ExcludeSNATCIDRs, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12")})
		}},
		{map[string]string{"AWS_VPC_ENI_MTU": "1500"}, func(c Config) bool { return c.ENIMTU == 1500 && c.PodMTU == 1500 }},
		{map[string]string{"POD_MTU": "8000"}, func(c Config) bool { return c.ENIMTU == 9001 && c.PodMTU == 8000 }},
		{map[string]string{"IP_COOLDOWN_PERIOD": "0"}, func(c Config) bool { return c.Cooldown == 0 }},
		{map[string]string{"AWS_VPC_K8S_CNI_LOGLEVEL": "debug"}, func(c Config) bool { return c.LogLevel == slog.LevelDebug }},
		{map[string]string{"AWS_VPC_K8S_CNI_LOGLEVEL": "FATAL"}, func(c Config) bool { return c.LogLevel > slog.LevelError }},
		{map[string]string{"INTROSPECTION_BIND_ADDRESS": "unix:/run/vpcnet/introspect.sock"}, func(c Config) bool { return c.IntrospectionAddr == "unix:/run/vpcnet/introspect.sock" }},
		{map[string]string{"ADDITIONAL_ENI_TAGS": `{"team":"web","cost-center":"42"}`}, func(c Config) bool { return c.AdditionalENITags["team"] == "web" && len(c.AdditionalENITags) == 2 }},
		{map[string]string{"MY_NODE_NAME": "ip-10-0-1-5.ec2.internal"}, func(c Config) bool { return c.NodeName == "ip-10-0-1-5.ec2.internal" }},
		{map[string]string{"VPCNET_EC2_ENDPOINT": "http://127.0.0.1:4566"}, func(c Config) bool { return c.EC2Endpoint == "http://127.0.0.1:4566" }},
		{map[string]string{"VPCNET_ADD_WAIT": "1m30s"}, func(c Config) bool { return c.AddWait == 90*time.Second }},
		{map[string]string{"VPCNET_STARTUP_TAINT": "node.vpcnet.io/agent-not-ready"}, func(c Config) bool { return c.StartupTaint == "node.vpcnet.io/agent-not-ready" }},
		{map[string]string{"VPCNET_KUBECONFIG": "/etc/vpcnet/kubeconfig"}, func(c Config) bool { return c.Kubeconfig == "/etc/vpcnet/kubeconfig" }},
		{map[string]string{"ENABLE_IPv6": "false", "ENABLE_POD_ENI": "false"}, func(Config) bool { return true }},
		{map[string]string{"ENABLE_IPv4": "false", "ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true"}, func(c Config) bool { return c.IPv6 && !c.IPv4 && c.V4Egress }},
		{map[string]string{"ENABLE_IPv4": "false", "ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true", "ENABLE_V4_EGRESS": "false"}, func(c Config) bool { return c.IPv6 && !c.V4Egress }},
		{map[string]string{}, func(c Config) bool { return c.IPv4 && !c.IPv6 && c.V4Egress }},
		{map[string]string{"MAX_PODS": "110"}, func(c Config) bool { return c.MaxPods == 110 }},
		// Both were refused once; aws-node's meanings now (issue 24).
		{map[string]string{"AWS_MANAGE_ENIS_NON_SCHEDULABLE": "true"}, func(c Config) bool { return c.ManageENIsNonSchedulable }},
		{map[string]string{"AWS_MANAGE_ENIS_NON_SCHEDULABLE": "false"}, func(c Config) bool { return !c.ManageENIsNonSchedulable }},
		{map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true"}, func(c Config) bool { return c.BandwidthPlugin }},
		{map[string]string{"VPCNET_POD_IMDS": "deny"}, func(c Config) bool { return c.PodIMDS == "deny" }},
		{map[string]string{"NETWORK_POLICY_ENFORCING_MODE": "strict"}, func(c Config) bool { return c.NetworkPolicy && c.NetworkPolicyMode == verdicts.Strict }},
		{map[string]string{"VPCNET_NETWORK_POLICY": "off"}, func(c Config) bool { return !c.NetworkPolicy && c.NetworkPolicyMode == verdicts.Standard }},
		{map[string]string{"VPCNET_NETWORK_POLICY": "off", "NETWORK_POLICY_ENFORCING_MODE": "standard"}, func(c Config) bool { return !c.NetworkPolicy }},
		// Empty counts as unset, as `value: ""` in a manifest.
		{map[string]string{"WARM_ENI_TARGET": "", "VPCNET_STATE_DIR": ""}, func(c Config) bool { return c.WarmENITarget == 1 && c.StateDir == "/var/lib/vpcnet" }},
	}
	for _, tt := range tests {
		c, err := Load(env(tt.vars))
		if err != nil {
			t.Errorf("Load(%v): %v", tt.vars, err)
			continue
		}
		if !tt.check(c) {
			t.Errorf("Load(%v) = %+v", tt.vars, c)
		}
	}
}

func TestLoadRefusesInvalidValuesNamingEach(t *testing.T) {
	tests := []struct {
		name, value, allowed string
	}{
		{"WARM_IP_TARGET", "-3", "must be a whole number ≥ 0"},
		{"WARM_ENI_TARGET", "one", "must be a whole number ≥ 0"},
		{"MAX_ENI", "lots", "must be a whole number (-1 for the instance type's limit)"},
		{"ENABLE_PREFIX_DELEGATION", "yes", "must be true or false"},
		{"AWS_VPC_ENI_MTU", "65000", "must be a whole number from 576 to 9001"},
		{"POD_MTU", "100", "must be a whole number from 576 to 9001"},
		{"IP_COOLDOWN_PERIOD", "30s", "must be a whole number of seconds from 0 to 86400"},
		{"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", "10.0.0.0/8,fd00::/8", `must be comma-separated IPv4 CIDRs such as 10.0.0.0/8,192.168.0.0/16; "fd00::/8" is not one`},
		{"AWS_VPC_K8S_CNI_RANDOMIZESNAT", "random", "must be one of prng, hashrandom, none"},
		{"AWS_VPC_K8S_CNI_LOGLEVEL", "verbose", "must be one of DEBUG, INFO, WARN, ERROR, FATAL"},
		{"AWS_VPC_K8S_CNI_VETHPREFIX", "vlan", "must be 1 to 4 letters, digits, '-' or '_', and not eth, vlan or lo"},
		{"AWS_VPC_K8S_CNI_VETHPREFIX", "pods", ""},
		{"ENI_CONFIG_LABEL_DEF", "topology.kubernetes.io/zone!", "must be a Kubernetes key such as example.com/name: [prefix/]name, name at most 63 letters, digits, '-', '_' or '.'"},
		{"MY_NODE_NAME", "Node_1", "must be a Kubernetes node name: lower-case letters, digits, '-' and '.', at most 253 characters"},
		{"ADDITIONAL_ENI_TAGS", "team=web", `must be a JSON object of strings such as {"team":"web"}`},
		{"ADDITIONAL_ENI_TAGS", `{"aws:owner":"me"}`, `tag "aws:owner": keys starting aws: or containing k8s.amazonaws.com are reserved`},
		{"INTROSPECTION_BIND_ADDRESS", "61679", "must be host:port (such as 127.0.0.1:61679 or :61678; port 0 picks a free one) or unix:/absolute/path"},
		{"VPCNET_METRICS_BIND_ADDRESS", ":99999", "must be host:port (such as 127.0.0.1:61679 or :61678; port 0 picks a free one) or unix:/absolute/path"},
		{"VPCNET_STATE_DIR", "var/lib/vpcnet", "must be an absolute path with no . or .. parts, such as /var/lib/vpcnet"},
		{"VPCNET_SOCKET", "/run/../tmp/s.sock", "must be an absolute path with no . or .. parts, such as /var/lib/vpcnet"},
		{"VPCNET_KUBECONFIG", "kubeconfig", "must be an absolute path with no . or .. parts, such as /var/lib/vpcnet"},
		{"VPCNET_CNI_CONF_NAME", "10-vpcnet.conf", "must be a file name ending in .conflist, such as 10-vpcnet.conflist"},
		{"VPCNET_EC2_ENDPOINT", "127.0.0.1:4566", "must be an http:// or https:// URL with a host and no user, such as http://127.0.0.1:8080"},
		{"VPCNET_ADD_WAIT", "10", "must be a duration such as 30s, 5m or 1h30m, at least 1s"},
		{"VPCNET_LEAKED_ENI_GRACE", "30s", "must be a duration such as 30s, 5m or 1h30m, at least 1m0s"},
		{"CLUSTER_NAME", strings.Repeat("x", 257), "must be at most 256 characters"},
		{"MAX_PODS", "-1", "must be a whole number ≥ 0"},
		{"VPCNET_POD_IMDS", "block", "must be one of allow, deny"},
		{"NETWORK_POLICY_ENFORCING_MODE", "Strict", "must be one of standard, strict"},
		{"NETWORK_POLICY_ENFORCING_MODE", "permissive", "must be one of standard, strict"},
		{"VPCNET_NETWORK_POLICY", "true", "must be one of on, off"},
		{"VPCNET_NETWORK_POLICY", "disabled", "must be one of on, off"},
		{"ENABLE_IPv4", "false", "must be true unless ENABLE_IPv6=true: pods need one address family; set ENABLE_IPv4=true, or ENABLE_IPv6=true for IPv6 pods"},
		{"ENABLE_V4_EGRESS", "no", "must be true or false"},
		{"ENABLE_IPv4", "yes", "must be true or false"},
		{"ENABLE_IPv6", "on", "must be true or false"},
		{"ENABLE_POD_ENI", "true", "must be false: vpcnet does not provide security groups for pods; switching would silently drop their enforcement"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := Load(env(map[string]string{tt.name: tt.value}))
			if tt.allowed == "" {
				if err != nil {
					t.Fatalf("Load refused a valid value: %v", err)
				}
				return
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load = %v, want a *config.Error", err)
			}
			want := []Problem{{Name: tt.name, Value: tt.value, Allowed: tt.allowed}}
			if !reflect.DeepEqual(cerr.Problems, want) {
				t.Errorf("problems\n got %+v\nwant %+v", cerr.Problems, want)
			}
		})
	}
}

func TestLoadReportsEveryProblemOnOneLine(t *testing.T) {
	_, err := Load(env(map[string]string{
		"WARM_IP_TARGET":  "-3",
		"AWS_VPC_ENI_MTU": "1500",
		"POD_MTU":         "9001",
		"VPCNET_ADD_WAIT": "soon",
		"WARM_ENI_TARGET": "2", // valid, so not mentioned
	}))
	want := `invalid settings: WARM_IP_TARGET="-3": must be a whole number ≥ 0; ` +
		`VPCNET_ADD_WAIT="soon": must be a duration such as 30s, 5m or 1h30m, at least 1s; ` +
		`POD_MTU="9001": must not exceed AWS_VPC_ENI_MTU (1500): larger packets would be dropped leaving the node`
	if err == nil || err.Error() != want {
		t.Errorf("Load error\n got %v\nwant %s", err, want)
	}
}

// Strict mode asks for pods to start isolated; with enforcement off
// nothing would isolate them, so the pair is refused rather than strict
// silently ignored.
func TestStrictModeWithNetworkPolicyOffStopsTheAgentWithOneLine(t *testing.T) {
	_, err := Load(env(map[string]string{"NETWORK_POLICY_ENFORCING_MODE": "strict", "VPCNET_NETWORK_POLICY": "off"}))
	want := `invalid settings: NETWORK_POLICY_ENFORCING_MODE="strict": must be standard (or unset) with VPCNET_NETWORK_POLICY=off: ` +
		`vpcnet then isolates no pod, so strict would be ignored; remove it, or turn enforcement on`
	if err == nil || err.Error() != want {
		t.Errorf("Load error\n got %v\nwant %s", err, want)
	}
}

func TestLoadReadsOnlyThroughLookup(t *testing.T) {
	t.Setenv("WARM_ENI_TARGET", "7")
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.WarmENITarget != 1 {
		t.Errorf("Load read the process environment: WARM_ENI_TARGET = %d", c.WarmENITarget)
	}
}

func TestSettingsValuesLoadBackToTheSameConfig(t *testing.T) {
	first, err := Load(env(map[string]string{
		"WARM_IP_TARGET":                     "3",
		"MAX_ENI":                            "2",
		"IP_COOLDOWN_PERIOD":                 "45",
		"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": "10.0.0.0/8,192.168.0.0/16",
		"ADDITIONAL_ENI_TAGS":                `{"b":"2","a":"1"}`,
		"AWS_VPC_K8S_CNI_LOGLEVEL":           "warn",
		"POD_MTU":                            "1500",
		"VPCNET_RECONCILE_INTERVAL":          "90s",
		"VPCNET_EC2_ENDPOINT":                "https://ec2.eu-west-1.amazonaws.com",
		"NETWORK_POLICY_ENFORCING_MODE":      "strict",
	}))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	names := map[string]bool{}
	for _, s := range first.Settings() {
		if names[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		names[s.Name] = true
		if s.Meaning == "" {
			t.Errorf("%s has no meaning for the docs", s.Name)
		}
		vars[s.Name] = s.Value
	}
	second, err := Load(env(vars))
	if err != nil {
		t.Fatalf("Load of the rendered settings: %v", err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("rendered settings load differently:\nfirst  %+v\nsecond %+v", first, second)
	}
}

// IPv6 mode is aws-node's (ipamd's isConfigValid, v1.23): IPv6 alone,
// from a /80 prefix, without custom networking. Every other combination
// stops the agent naming the setting to change and the fix.
func TestIPv6ModeRefusesWhatAWSNodeRefusesNamingTheFix(t *testing.T) {
	ipv6 := map[string]string{"ENABLE_IPv4": "false", "ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true"}
	with := func(name, value string) map[string]string {
		m := maps.Clone(ipv6)
		if value == "" {
			delete(m, name)
		} else {
			m[name] = value
		}
		return m
	}
	tests := []struct {
		name string
		vars map[string]string
		want Problem
	}{
		{"dual stack", with("ENABLE_IPv4", "true"), Problem{"ENABLE_IPv4", "true",
			"must be false with ENABLE_IPv6=true: pods get IPv4 or IPv6 addresses, not both (the Amazon VPC CNI has no dual stack either); set ENABLE_IPv4=false"}},
		{"ENABLE_IPv4 left at its default", with("ENABLE_IPv4", ""), Problem{"ENABLE_IPv4", "true",
			"must be false with ENABLE_IPv6=true: pods get IPv4 or IPv6 addresses, not both (the Amazon VPC CNI has no dual stack either); set ENABLE_IPv4=false"}},
		{"neither family", map[string]string{"ENABLE_IPv4": "false", "ENABLE_IPv6": "false"}, Problem{"ENABLE_IPv4", "false",
			"must be true unless ENABLE_IPv6=true: pods need one address family; set ENABLE_IPv4=true, or ENABLE_IPv6=true for IPv6 pods"}},
		{"no prefix delegation", with("ENABLE_PREFIX_DELEGATION", "false"), Problem{"ENABLE_PREFIX_DELEGATION", "false",
			"must be true with ENABLE_IPv6=true: IPv6 pods take their addresses from a /80 prefix on the primary ENI, as in the Amazon VPC CNI; set ENABLE_PREFIX_DELEGATION=true"}},
		{"prefix delegation left at its default", with("ENABLE_PREFIX_DELEGATION", ""), Problem{"ENABLE_PREFIX_DELEGATION", "false",
			"must be true with ENABLE_IPv6=true: IPv6 pods take their addresses from a /80 prefix on the primary ENI, as in the Amazon VPC CNI; set ENABLE_PREFIX_DELEGATION=true"}},
		{"custom networking", with("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true"), Problem{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true",
			"must be false with ENABLE_IPv6=true: IPv6 pods use the primary ENI's /80 prefix, never an ENIConfig's subnet (the Amazon VPC CNI refuses it too); set it to false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(env(tt.vars))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load(%v) = %v, want a *config.Error", tt.vars, err)
			}
			if want := []Problem{tt.want}; !reflect.DeepEqual(cerr.Problems, want) {
				t.Errorf("problems\n got %+v\nwant %+v", cerr.Problems, want)
			}
		})
	}
}
