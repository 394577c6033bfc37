package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/verdicts"
)

// settings is every setting, in the order of docs/settings.md: the Amazon
// VPC CNI's names first, then vpcnet's own.
var settings = []setting{
	intVar("WARM_ENI_TARGET", "1", "Free ENIs, with all their addresses, to keep attached beyond those in use. Ignored when WARM_IP_TARGET or MINIMUM_IP_TARGET is set.",
		0, maxInt, func(c *Config) *int { return &c.WarmENITarget }),
	intVar("WARM_IP_TARGET", "0", "Free addresses to keep ready for new pods; 0 leaves it unset. Overrides WARM_ENI_TARGET.",
		0, maxInt, func(c *Config) *int { return &c.WarmIPTarget }),
	intVar("MINIMUM_IP_TARGET", "0", "Addresses to hold in total, in use or free, however few pods run; 0 leaves it unset.",
		0, maxInt, func(c *Config) *int { return &c.MinimumIPTarget }),
	intVar("WARM_PREFIX_TARGET", "0", "With prefix delegation, free /28 prefixes to keep attached; 0 leaves it unset.",
		0, maxInt, func(c *Config) *int { return &c.WarmPrefixTarget }),
	maxENIVar(),
	boolVar("ENABLE_PREFIX_DELEGATION", "false", "Give ENIs /28 prefixes (16 pod addresses each) instead of single secondary addresses. Nitro instances only.",
		func(c *Config) *bool { return &c.PrefixDelegation }),
	cooldownVar(),
	boolVar("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "false", "Create pod ENIs in the subnet and security groups of the node's ENIConfig instead of the node's own.",
		func(c *Config) *bool { return &c.CustomNetwork }),
	boolVar("ENABLE_SUBNET_DISCOVERY", "true", "New ENIs may go to any subnet of the node's VPC and zone tagged kubernetes.io/role/cni=1, the one with most free addresses first, or the node's own subnet unless it is tagged kubernetes.io/role/cni=0; a subnet out of room passes to the next. With CLUSTER_NAME set, a subnet tagged kubernetes.io/role/cni=1 and cni.networking.k8s.aws/cluster/<name> for other clusters only is left to them. Security groups are the primary ENI's. Custom networking's ENIConfig subnet wins. Off, new ENIs go to the node's own subnet, unless the same tags keep them out of it.",
		func(c *Config) *bool { return &c.SubnetDiscovery }),
	stringVar("ENI_CONFIG_LABEL_DEF", "topology.kubernetes.io/zone", "Node label whose value names the node's ENIConfig, with custom networking; by default the node's zone, so one ENIConfig per zone, named after it, serves every node. (The Amazon VPC CNI defaults to k8s.amazonaws.com/eniConfig.) A node with neither the annotation nor the label uses the ENIConfig named default.",
		labelKey, func(c *Config) *string { return &c.ENIConfigLabel }),
	stringVar("ENI_CONFIG_ANNOTATION_DEF", "k8s.amazonaws.com/eniConfig", "Node annotation whose value names the node's ENIConfig; it takes precedence over the label. The node label vpc.amazonaws.com/externalEniConfig, set outside the cluster (the kubelet's --node-labels), takes precedence over both, as in the Amazon VPC CNI.",
		labelKey, func(c *Config) *string { return &c.ENIConfigAnnotation }),
	boolVar("AWS_MANAGE_ENIS_NON_SCHEDULABLE", "false", "Whether the agent attaches ENIs, assigns addresses and detaches ENIs on a cordoned node (its Node tainted node.kubernetes.io/unschedulable:NoSchedule). False, as in the Amazon VPC CNI, holds the pool as it is while the node is cordoned (surplus addresses are still released), so a node being drained takes nothing more from the subnet; pods started there meanwhile (DaemonSets) are served from the addresses already held. Needs the Kubernetes API; without it the node counts as schedulable.",
		func(c *Config) *bool { return &c.ManageENIsNonSchedulable }),
	boolVar("AWS_VPC_K8S_CNI_EXTERNALSNAT", "false", "Leave source NAT of pod traffic leaving the VPC to an external NAT device instead of the node.",
		func(c *Config) *bool { return &c.ExternalSNAT }),
	excludeSNATVar(),
	stringVar("AWS_VPC_K8S_CNI_RANDOMIZESNAT", "prng", "Source port choice for SNAT: prng (fully random), hashrandom (random) or none (sequential).",
		oneOf("prng", "hashrandom", "none"), func(c *Config) *string { return &c.RandomizeSNAT }),
	intVar("AWS_VPC_ENI_MTU", "9001", "MTU of the node's ENIs.",
		576, 9001, func(c *Config) *int { return &c.ENIMTU }),
	podMTUVar(),
	stringVar("AWS_VPC_K8S_CNI_VETHPREFIX", "eni", "Prefix of the host-side veth names; the rest is 11 hex digits of a hash of the pod's namespace and name.",
		vethPrefix, func(c *Config) *string { return &c.VethPrefix }),
	stringVar("MY_NODE_NAME", "", "Name of this node's Node object, from the downward API (spec.nodeName). If empty, the agent finds its Node by provider ID.",
		nodeName, func(c *Config) *string { return &c.NodeName }),
	stringVar("CLUSTER_NAME", "", "Cluster name, tagged on every ENI the agent creates so that leaked ENIs are collected only by their own cluster, and matched against subnets' cni.networking.k8s.aws/cluster/<name> tags (see ENABLE_SUBNET_DISCOVERY): empty, those tags are not checked, as in the Amazon VPC CNI.",
		maxLen(256), func(c *Config) *string { return &c.ClusterName }),
	tagsVar(),
	logLevelVar(),
	boolVar("ENABLE_BANDWIDTH_PLUGIN", "false", "Chain the reference bandwidth plugin after vpcnet in the CNI configuration the agent writes, so pods' kubernetes.io/ingress-bandwidth and kubernetes.io/egress-bandwidth annotations shape their traffic. The install-cni init container puts the plugin on nodes that lack it.",
		func(c *Config) *bool { return &c.BandwidthPlugin }),
	boolVar("DISABLE_INTROSPECTION", "false", "Turn off the introspection endpoint (/v1/...).",
		func(c *Config) *bool { return &c.DisableIntrospection }),
	stringVar("INTROSPECTION_BIND_ADDRESS", "127.0.0.1:61679", "Where the introspection endpoint listens: host:port or unix:/path.",
		bindAddr, func(c *Config) *string { return &c.IntrospectionAddr }),
	boolVar("DISABLE_METRICS", "false", "Turn off the Prometheus metrics endpoint.",
		func(c *Config) *bool { return &c.DisableMetrics }),
	boolVar("DISABLE_LEAKED_ENI_CLEANUP", "false", "Do not delete available ENIs this cluster's agents created and left behind.",
		func(c *Config) *bool { return &c.DisableLeakedENICleanup }),
	networkPolicyModeVar(),
	boolVar("ENABLE_IPv4", "true", "Give pods IPv4 addresses. Must be false with ENABLE_IPv6=true (pods get IPv4 or IPv6, not both, as in the Amazon VPC CNI), and true otherwise. (The Amazon VPC CNI's binary defaults to false; its manifest sets true.)",
		func(c *Config) *bool { return &c.IPv4 }),
	boolVar("ENABLE_IPv6", "false", "Give pods IPv6 addresses, as the Amazon VPC CNI's IPv6 mode does: the agent asks EC2 once for one /80 prefix on the node's primary ENI (or keeps the one there) and gives each pod an address from it; no warm pool is kept (the warm targets, MAX_ENI and subnet discovery then mean nothing) and no ENI is attached for pods. Needs ENABLE_IPv4=false and ENABLE_PREFIX_DELEGATION=true, no custom networking, a Nitro instance type and a subnet with an IPv6 CIDR; the agent refuses to start otherwise, naming what is missing. The node is set up as aws-node sets it up in IPv6 mode (IPv6 forwarding, accept_ra=2 on the primary interface, no SNAT). hostPorts are mapped to IPv6 pods in table ip6 vpcnet-hostport. NetworkPolicy is enforced for IPv6 pods in table ip6 vpcnet-policy, and their IPv4 egress through the node (ENABLE_V4_EGRESS) by the same egress policies in table ip vpcnet-policy; README, IPv6 clusters.",
		func(c *Config) *bool { return &c.IPv6 }),
	boolVar("ENABLE_V4_EGRESS", "true", "With ENABLE_IPv6=true, let pods reach IPv4 destinations through a node-local IPv4 address per pod (169.254.172.0/22 in the Amazon VPC CNI) SNATed to the node's primary IPv4 address. The agent then chains vpcnet-egress-v4 after vpcnet in the CNI configuration, as aws-node chains egress-cni, with aws-node's values (host-local in VPCNET_EGRESS_V4_IPAM_DIR, the pod's interface v4if0, AWS_VPC_K8S_CNI_RANDOMIZESNAT); false chains nothing, and IPv6 pods reach no IPv4 address. With NetworkPolicy enforcement on, an egress-isolated pod reaches only the IPv4 destinations an ipBlock of its egress policies allows, judged at its egress veth before the SNAT (table ip vpcnet-policy). No effect without ENABLE_IPv6.",
		func(c *Config) *bool { return &c.V4Egress }),
	unsupportedVar("ENABLE_POD_ENI", "vpcnet does not provide security groups for pods; switching would silently drop their enforcement"),

	intVar("MAX_PODS", "0", "The node's max pods, for nodes without the Kubernetes API; the pool never grows past what this many pods can use. With the API the kubelet's value (the Node's status.capacity.pods) wins. 0 means the EKS rule: with prefix delegation ENIs × (addresses per ENI − 1) × 16 + 2, at most 110 (250 above 30 vCPUs); without, ENIs × (addresses per ENI − 1) + 2.",
		0, maxInt, func(c *Config) *int { return &c.MaxPods }),
	stringVar("VPCNET_POD_IMDS", "allow", "Whether pods may reach the instance metadata service (169.254.169.254, fd00:ec2::254) and so the node's IAM role: allow, or deny, which drops their packets to it in vpcnet's nftables table. hostNetwork pods are not affected.",
		oneOf("allow", "deny"), func(c *Config) *string { return &c.PodIMDS }),
	networkPolicyVar(),
	boolVar("VPCNET_NETWORK_POLICY_LOG_DROPS", "false", "Log the first packet of each connection NetworkPolicy drops, through the kernel log (journalctl -k; prefix \"vpcnet-policy drop ingress|egress NAMESPACE/POD: \"), at most 10 a second per pod and direction.",
		func(c *Config) *bool { return &c.NetworkPolicyLogDrops }),
	stringVar("VPCNET_METRICS_BIND_ADDRESS", ":61678", "Where the Prometheus metrics endpoint listens (host:port). The Amazon VPC CNI's fixed port is the default.",
		bindAddr, func(c *Config) *string { return &c.MetricsAddr }),
	stringVar("VPCNET_SOCKET", "/run/vpcnet/vpcnetd.sock", "Unix socket, root only, on which the CNI plugin asks the agent for addresses.",
		absPath, func(c *Config) *string { return &c.Socket }),
	stringVar("VPCNET_STATE_DIR", "/var/lib/vpcnet", "Directory of the agent's checkpoint of which pod holds which address. Must survive agent restarts (a hostPath).",
		absPath, func(c *Config) *string { return &c.StateDir }),
	stringVar("VPCNET_CNI_CONF_DIR", "/etc/cni/net.d", "Directory where the agent writes the CNI configuration once it can serve.",
		absPath, func(c *Config) *string { return &c.CNIConfDir }),
	stringVar("VPCNET_CNI_BIN_DIR", "/opt/cni/bin", "Directory the container runtime runs CNI plugins from (containerd's bin_dir), where vpcnet-install puts vpcnet and portmap. The agent does not read it and it moves nothing (vpcnet-install -to does): the agent reports it on /v1/config so that vpcnetctl doctor and bundle look for the plugins where the runtime does.",
		absPath, func(c *Config) *string { return &c.CNIBinDir }),
	stringVar("VPCNET_NETWORK_NAME", "aws-cni", "CNI network name in the configuration the agent writes; part of every attachment's identity. The Amazon VPC CNI's name by default, so pods it wired are released normally after a switch-over.",
		cniNetworkName, func(c *Config) *string { return &c.NetworkName }),
	stringVar("VPCNET_CNI_CONF_NAME", "10-vpcnet.conflist", "File name of the CNI configuration the agent writes.",
		cniConfName, func(c *Config) *string { return &c.CNIConfName }),
	stringVar("VPCNET_AWS_VPC_CNI_CHECKPOINT", "/var/run/aws-node/ipam.json", "The Amazon VPC CNI's checkpoint: read once when the agent has none of its own, so a node switches over with its pods running, and written from the agent's own as it stops, so aws-node can take the node back with them.",
		absPath, func(c *Config) *string { return &c.AWSCNICheckpoint }),
	stringVar("VPCNET_EGRESS_V4_IPAM_DIR", "/run/cni/v6pd/egress-v4-ipam", "With ENABLE_IPv6=true and ENABLE_V4_EGRESS=true, the directory where host-local keeps which pod holds which node-local IPv4 egress address (the ipam dataDir of vpcnet-egress-v4's entry in the CNI configuration). The Amazon VPC CNI's directory by default, so both see the same addresses in use after a switch-over either way; the local cloud gives each node its own.",
		absPath, func(c *Config) *string { return &c.EgressV4IPAMDir }),
	durationVar("VPCNET_ENI_DETACH_HOLD", "5m", "How long the pool must have had no use for an ENI before it is detached: detaching and re-creating one costs five EC2 calls from the account's shared budget, so bursts of pods minutes apart keep their ENIs. Surplus addresses are released without a hold.",
		0, func(c *Config) *time.Duration { return &c.DetachHold }),
	durationVar("VPCNET_ENI_GRACE", "1m", "How long a newly attached ENI is kept even when the pool has more than it needs.",
		0, func(c *Config) *time.Duration { return &c.ENIGrace }),
	durationVar("VPCNET_LEAKED_ENI_GRACE", "10m", "How long an available ENI with this cluster's tag waits before it is deleted as leaked.",
		time.Minute, func(c *Config) *time.Duration { return &c.LeakedENIGrace }),
	durationVar("VPCNET_ADD_WAIT", "1m", "How long the plugin's request for an address waits while one is on its way (addresses being assigned, an ENI attaching, the cluster's EC2 budget, a cooldown) before failing with the reason (while the budget controller fails over and the agent holds its EC2 calls for the next leader, up to 20 s more; once EC2 is making the address, its calls granted or its ENI attaching, up to 25 s more in all); when none can come (subnet exhausted, ENI or max-pods limit, node cordoned, IAM refusal, ENIConfig not usable) it fails with the reason after 10 s. A failed ADD makes kubelet tear the sandbox down and try again only after its 10-15 s backoff; the plugin's timeout in the CNI configuration the agent writes is this plus 30 s.",
		time.Second, func(c *Config) *time.Duration { return &c.AddWait }),
	durationVar("VPCNET_ADD_DEMAND_MEMORY", "1m", "How long an address request that timed out still counts as demand: kubelet retries it, so the warm pool must not shrink under it meanwhile.",
		time.Second, func(c *Config) *time.Duration { return &c.DemandMemory }),
	durationVar("VPCNET_RECLAIM_AFTER", "2m", "How long a pod's address must be missing from the host's pod routes (its pod deleted while the agent could not hear the DEL) before the agent releases it itself, without waiting for the runtime's CNI GC. Longer than any ADD in flight.",
		10*time.Second, func(c *Config) *time.Duration { return &c.ReclaimAfter }),
	durationVar("VPCNET_RECONCILE_INTERVAL", "1m", "How often the agent compares its pool with what is attached: with IMDS every interval, with EC2 when IMDS shows a change, and every tenth interval regardless.",
		time.Second, func(c *Config) *time.Duration { return &c.ReconcileInterval }),
	durationVar("VPCNET_EC2_CALL_TIMEOUT", "10s", "Time limit of one EC2 API call, retries excluded.",
		time.Second, func(c *Config) *time.Duration { return &c.EC2CallTimeout }),
	stringVar("VPCNET_EC2_ENDPOINT", "", "EC2 API endpoint URL; empty means the region's. Set for the local cloud or a VPC endpoint.",
		optionalURL, func(c *Config) *string { return &c.EC2Endpoint }),
	stringVar("VPCNET_IMDS_ENDPOINT", "", "Instance metadata service URL; empty means http://169.254.169.254.",
		optionalURL, func(c *Config) *string { return &c.IMDSEndpoint }),
	stringVar("VPCNET_STARTUP_TAINT", "", "Taint key the agent removes from its Node once it can serve (every effect of that key); it is never added back. Empty means none.",
		optionalLabelKey, func(c *Config) *string { return &c.StartupTaint }),
	stringVar("VPCNET_KUBECONFIG", "", "Kubeconfig file for the Kubernetes API. Empty means the pod's service account when KUBERNETES_SERVICE_HOST is set, and otherwise no Kubernetes: node identity, Events, custom networking and the startup taint are off, as in the local cloud.",
		optionalAbsPath, func(c *Config) *string { return &c.Kubeconfig }),
	stringVar("VPCNET_BUDGET_LEASE", "", "The budget controller's Lease, as NAMESPACE/NAME (the chart's kube-system/vpcnet-budget): before calling EC2 the agent asks the controller that holds it, so the cluster's nodes together stay inside the account's EC2 request limits, pods waiting first; and every reconcile interval it asks which of its subnets are nearly full (a node found one out of addresses in the last 10 minutes), where it then keeps no warm pool and gives back addresses its pods do not use. Empty, or no controller answering, means each node spends on its own and keeps its warm pool (the agent then asks again after 30 s); a controller that was answering and stops is taken for a failover, and the agent first holds its EC2 calls for up to 30 s, asking every 2 s, until the next leader answers.",
		optionalLeaseRef, func(c *Config) *string { return &c.BudgetLease }),
}

// maxENIVar reads MAX_ENI as the Amazon VPC CNI does: any value below 1
// means no limit beyond the instance type's, kept as -1.
func maxENIVar() setting {
	s := intVar("MAX_ENI", "-1", "Most ENIs to attach, the primary included; -1 (or any value below 1) means the instance type's limit.",
		-maxInt-1, maxInt, func(c *Config) *int { return &c.MaxENI })
	parse := s.set
	s.set = func(c *Config, v string) error {
		if err := parse(c, v); err != nil {
			return errors.New("must be a whole number (-1 for the instance type's limit)")
		}
		c.MaxENI = max(c.MaxENI, -1)
		if c.MaxENI == 0 {
			c.MaxENI = -1
		}
		return nil
	}
	return s
}

// cooldownVar keeps the Amazon VPC CNI's whole seconds.
func cooldownVar() setting {
	return setting{name: "IP_COOLDOWN_PERIOD", def: "30",
		meaning: "Seconds a freed address rests before another pod gets it, so stale routes elsewhere cannot misdeliver.",
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 24*3600 {
				return errors.New("must be a whole number of seconds from 0 to 86400")
			}
			c.Cooldown = time.Duration(n) * time.Second
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(int(c.Cooldown / time.Second)) },
	}
}

// networkPolicyModeVar keeps the Amazon VPC CNI's values and meanings, so
// the value in aws-node's own manifest (standard) means the same here.
func networkPolicyModeVar() setting {
	return setting{name: "NETWORK_POLICY_ENFORCING_MODE", def: string(verdicts.Standard),
		meaning: "How a pod starts whose NetworkPolicies the agent cannot know yet (the API server has not told it the pod's labels): standard, open, and isolated as its policies say as soon as they are known; strict, isolated both ways with nothing allowed until then, and its ADD fails (the runtime retries) while the agent has not yet listed the cluster's policies, namespaces and pods. Traffic between a pod and its own node (kubelet probes) always passes, unlike in the Amazon VPC CNI's strict mode (aws-network-policy-agent issues #271, #288). Strict needs VPCNET_NETWORK_POLICY=on.",
		set: func(c *Config, v string) error {
			switch m := verdicts.Mode(v); m {
			case verdicts.Standard, verdicts.Strict:
				c.NetworkPolicyMode = m
				return nil
			}
			return fmt.Errorf("must be one of %s, %s", verdicts.Standard, verdicts.Strict)
		},
		get: func(c *Config) string { return string(c.NetworkPolicyMode) },
	}
}

// networkPolicyVar is on or off rather than a bool: it names a state of
// the node, as operators say it ("policy is off here").
func networkPolicyVar() setting {
	return setting{name: "VPCNET_NETWORK_POLICY", def: "on",
		meaning: "Whether the agent enforces NetworkPolicy for its pods, in its own nftables tables: on, or off for clusters that chain another policy engine (Calico in policy-only mode, Cilium in generic-veth chaining; README, Network policy). Needs the Kubernetes API. Off, the agent still counts the cluster's NetworkPolicy objects and says that this node enforces none of them.",
		set: func(c *Config, v string) error {
			if err := oneOf("on", "off")(v); err != nil {
				return err
			}
			c.NetworkPolicy = v == "on"
			return nil
		},
		get: func(c *Config) string {
			if c.NetworkPolicy {
				return "on"
			}
			return "off"
		},
	}
}

// podMTUVar defaults to the ENI MTU; crossCheck fills that in.
func podMTUVar() setting {
	s := intVar("POD_MTU", "0", "MTU of the pods' interfaces.", 576, 9001, func(c *Config) *int { return &c.PodMTU })
	parse := s.set
	s.set = func(c *Config, v string) error {
		if v == "0" {
			return nil
		}
		return parse(c, v)
	}
	s.docDef = "AWS_VPC_ENI_MTU"
	return s
}

func excludeSNATVar() setting {
	return setting{name: "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", def: "",
		meaning: "Comma-separated IPv4 CIDRs that pod traffic reaches without source NAT, besides the VPC's own.",
		set: func(c *Config, v string) error {
			c.ExcludeSNATCIDRs = nil
			for item := range strings.SplitSeq(v, ",") {
				item = strings.TrimSpace(item)
				if item == "" {
					continue
				}
				p, err := netip.ParsePrefix(item)
				if err != nil || !p.Addr().Is4() {
					return fmt.Errorf("must be comma-separated IPv4 CIDRs such as 10.0.0.0/8,192.168.0.0/16; %q is not one", item)
				}
				c.ExcludeSNATCIDRs = append(c.ExcludeSNATCIDRs, p.Masked())
			}
			return nil
		},
		get: func(c *Config) string {
			parts := make([]string, len(c.ExcludeSNATCIDRs))
			for i, p := range c.ExcludeSNATCIDRs {
				parts[i] = p.String()
			}
			return strings.Join(parts, ",")
		},
	}
}

// tagsVar reads ADDITIONAL_ENI_TAGS, a JSON object, as the Amazon VPC CNI
// does, but refuses reserved keys instead of dropping them silently.
func tagsVar() setting {
	return setting{name: "ADDITIONAL_ENI_TAGS", def: "{}",
		meaning: `Extra tags on every ENI the agent creates, as a JSON object such as {"team":"web"}.`,
		set: func(c *Config, v string) error {
			var tags map[string]string
			if err := json.Unmarshal([]byte(v), &tags); err != nil {
				return errors.New(`must be a JSON object of strings such as {"team":"web"}`)
			}
			for k, val := range tags {
				switch {
				case k == "" || len(k) > 128 || len(val) > 256:
					return fmt.Errorf("tag %q: keys must be 1 to 128 characters and values at most 256", k)
				case strings.HasPrefix(strings.ToLower(k), "aws:"), strings.Contains(k, "k8s.amazonaws.com"):
					return fmt.Errorf("tag %q: keys starting aws: or containing k8s.amazonaws.com are reserved", k)
				}
			}
			c.AdditionalENITags = tags
			return nil
		},
		get: func(c *Config) string {
			b, _ := json.Marshal(c.AdditionalENITags) // sorted keys
			if len(c.AdditionalENITags) == 0 {
				return "{}"
			}
			return string(b)
		},
	}
}

var logLevels = []struct {
	name  string
	level slog.Level
}{
	{"DEBUG", slog.LevelDebug},
	{"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn},
	{"ERROR", slog.LevelError},
	{"FATAL", slog.LevelError + 4},
}

func logLevelVar() setting {
	return setting{name: "AWS_VPC_K8S_CNI_LOGLEVEL", def: "INFO",
		meaning: "Least severe log messages written: DEBUG, INFO, WARN, ERROR or FATAL, in any case. (The Amazon VPC CNI defaults to DEBUG.)",
		set: func(c *Config, v string) error {
			for _, l := range logLevels {
				if strings.EqualFold(v, l.name) {
					c.LogLevel = l.level
					return nil
				}
			}
			return errors.New("must be one of DEBUG, INFO, WARN, ERROR, FATAL")
		},
		get: func(c *Config) string {
			for _, l := range logLevels {
				if c.LogLevel == l.level {
					return l.name
				}
			}
			return c.LogLevel.String()
		},
	}
}

// unsupportedVar is an Amazon VPC CNI feature vpcnet does not have: the
// agent refuses to start with it on rather than ignore it.
func unsupportedVar(name, why string) setting {
	return setting{name: name, def: "false",
		meaning: "Must be false: " + why + ".",
		set:     func(_ *Config, v string) error { return mustBe("false", why)(v) },
		get:     func(*Config) string { return "false" },
	}
}
