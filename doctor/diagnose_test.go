package doctor

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/introspect"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// healthy is a node with nothing wrong: every source read, agreeing.
func healthy() Facts {
	return Facts{
		Now: now,
		Agent: &AgentFacts{
			Status: introspect.Status{
				Ready: true, InstanceID: "i-1", InstanceType: "m5.large", LimitsSource: "table or DescribeInstanceTypes",
				MaxENIs: 3, IPv4PerENI: 10, Addresses: introspect.Counts{Total: 18, Assigned: 2, Free: 16},
			},
			Config: map[string]string{"CLUSTER_NAME": "c1", "ENABLE_PREFIX_DELEGATION": "false"},
			Policy: &introspect.PolicyStatus{Enabled: true, Mode: "standard", Synced: true, Policies: 2, Isolated: 1, Applied: now.Add(-time.Minute)},
		},
		Checkpoint: &CheckpointFacts{Path: "/var/lib/vpcnet/checkpoint.json", ModTime: now, Entries: []checkpoint.Entry{
			{Addr: netip.MustParseAddr("10.0.0.10")}, {Addr: netip.MustParseAddr("10.0.0.11")},
		}},
		Host: &HostFacts{Hostname: "ip-10-0-0-4.us-west-2.compute.internal", PodRoutes: []PodRoute{
			{Addr: netip.MustParseAddr("10.0.0.10"), Dev: "eni1"}, {Addr: netip.MustParseAddr("10.0.0.11"), Dev: "eni2"},
		}, Chains: []NFTChain{{Family: "ip", Table: "vpcnet", Chain: "snat"}}},
		CNI:  &CNIFacts{ConfDir: "/etc/cni/net.d", BinDir: "/opt/cni/bin", Files: []string{"10-vpcnet.conflist"}, Ours: "10-vpcnet.conflist", StatusRan: true},
		IMDS: &IMDSFacts{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-west-2a", Region: "us-west-2", LocalHostname: "ip-10-0-0-4.us-west-2.compute.internal", Role: "nodes", V1Allowed: new(false)},
		EC2: &EC2Facts{
			InstanceID: "i-1", PrivateDNSName: "ip-10-0-0-4.us-west-2.compute.internal",
			Metadata: &MetadataOptions{HTTPTokens: "required", HopLimit: 1, HTTPEndpoint: "enabled"},
			ENIs: []ENIFact{{ID: "eni-1", Status: "in-use", SubnetID: "subnet-a", InterfaceType: "interface", DeviceIndex: 0,
				PrimaryIP: netip.MustParseAddr("10.0.0.4"), Secondary: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11")}}},
			Subnets: []SubnetFact{{ID: "subnet-a", CIDR: netip.MustParsePrefix("10.0.0.0/24"), Available: 200}},
			DryRun:  map[string]string{"CreateNetworkInterface": "", "AttachNetworkInterface": ""},
		},
		Kube: &KubeFacts{
			Node:    &NodeFact{Name: "ip-10-0-0-4.us-west-2.compute.internal", ProviderID: "aws:///us-west-2a/i-1"},
			FoundBy: "name", AWSAuth: &AWSAuth{RoleARNs: []string{"arn:aws:iam::1:role/nodes"}},
			NetworkPolicies: new(2),
		},
		ClusterName: "c1", StartupTaint: "vpcnet.io/not-ready",
	}
}

func TestHealthyNodeHasNoFinding(t *testing.T) {
	if r := Diagnose(healthy()); len(r.Findings) != 0 || r.HasError() {
		t.Fatalf("findings on a healthy node: %+v", r.Findings)
	}
}

func TestEachBrokenNodeGetsItsFinding(t *testing.T) {
	cooling := now.Add(25 * time.Second)
	young := now.Add(-time.Second).Format(time.RFC3339)
	tests := []struct {
		name   string
		break_ func(f *Facts)
		id     string
		sev    Severity
		// evidence and fix are substrings of the finding's evidence and fix.
		evidence, fix string
	}{
		{"agent down", func(f *Facts) {
			f.Agent = nil
			f.Sources = []Source{{Name: SourceAgent, Detail: "vpcnetd not reachable at http://127.0.0.1:61679"}}
		}, "agent-unreachable", Error, "not reachable", "--agent"},
		{"story 1: unknown instance type", func(f *Facts) {
			f.Agent.Status.LimitsSource = "observed (instance type x9.big unknown: UnauthorizedOperation)"
			f.Agent.Status.InstanceType = "x9.big"
		}, "limits-unknown", Error, "observed (instance type x9.big", "ec2:DescribeInstanceTypes"},
		{"story 2: quarantined", func(f *Facts) {
			f.Agent.Status.Quarantined = []string{"10.0.0.12"}
		}, "addresses-quarantined", Warning, "10.0.0.12", "never detach"},
		{"story 2: stale entries", func(f *Facts) {
			f.Agent.Status.StaleEntries = []introspect.Hold{{Address: "10.0.0.13", Pod: "default/web", ContainerID: "c1"}}
		}, "checkpoint-stale-entries", Warning, "10.0.0.13 held for default/web", "CNI GC"},
		{"story 2: checkpoint older than the host's pods", func(f *Facts) {
			f.Checkpoint.Entries = f.Checkpoint.Entries[:1]
		}, "checkpoint-behind-host", Error, "10.0.0.11 via eni2", "restore the newest checkpoint"},
		{"story 2: checkpoint missing with live pods", func(f *Facts) {
			f.Checkpoint.Entries, f.Checkpoint.Missing = nil, true
		}, "checkpoint-behind-host", Error, "does not exist", "quarantines"},
		{"story 2: checkpoint address gone from EC2", func(f *Facts) {
			f.EC2.ENIs[0].Secondary = f.EC2.ENIs[0].Secondary[:1]
		}, "checkpoint-address-not-in-ec2", Error, "10.0.0.11", "CloudTrail"},
		{"corrupt checkpoint", func(f *Facts) {
			f.Checkpoint.Entries, f.Checkpoint.Corrupt = nil, "line 3: unexpected }"
		}, "checkpoint-corrupt", Error, "line 3", "kept a copy"},
		{"story 3: subnet exhausted", func(f *Facts) {
			f.EC2.Subnets[0].Available = 0
			f.Agent.Status.Waiting = 1
			f.Agent.Status.LastEC2Error = "InsufficientFreeAddressesInSubnet"
		}, "subnet-exhausted", Error, "subnet-a (10.0.0.0/24): 0 free addresses", "larger subnet"},
		{"issue 15: budget controller not answering", func(f *Facts) {
			until := now.Add(20 * time.Second)
			f.Agent.Status.Budget = &introspect.BudgetStatus{Lease: "kube-system/vpcnet-budget", AloneUntil: &until,
				AloneBecause: "find the budget controller: no budget controller leader: lease kube-system/vpcnet-budget not found"}
		}, "budget-controller-unreachable", Warning, "lease kube-system/vpcnet-budget not found", "vpcnet-budget Deployment"},
		{"issue 15: subnet under pressure", func(f *Facts) {
			f.Agent.Status.Budget = &introspect.BudgetStatus{Lease: "kube-system/vpcnet-budget", SubnetsUnderPressure: []string{"subnet-a"}}
		}, "subnet-pressure", Info, "InsufficientFreeAddressesInSubnet", "additional subnet"},
		{"story 3: subnet fragmented for prefixes", func(f *Facts) {
			f.Agent.Config["ENABLE_PREFIX_DELEGATION"] = "true"
			f.EC2.Subnets[0].Available = 9
			f.Agent.Status.LastEC2Error = "AssignPrivateIpAddresses: InsufficientCidrBlocks"
		}, "subnet-fragmented", Error, "9 free addresses", "subnet CIDR reservation"},
		{"story 3: ENI limit", func(f *Facts) {
			f.Agent.Status.Waiting = 2
			f.Agent.Status.Shortfall = "2 addresses short: all 3 ENIs the instance type allows are attached and full; use a larger instance type or enable prefix delegation"
		}, "eni-limit-reached", Error, "at most 3 ENIs of 10 addresses", "larger instance type"},
		{"story 3: max pods", func(f *Facts) {
			f.Agent.Status.Shortfall = "1 address short of the target: the pool already holds as many addresses as max pods (29) can use, and never holds more"
		}, "max-pods-reached", Warning, "max pods (29)", "max-pods"},
		{"story 4: leaked ENIs", func(f *Facts) {
			f.EC2.Leaked = []ENIFact{{ID: "eni-leak", SubnetID: "subnet-a", DeviceIndex: -1, Tags: map[string]string{
				cloud.TagCreatedAt: now.Add(-3 * time.Hour).Format(time.RFC3339), cloud.TagInstanceID: "i-dead"}}}
		}, "leaked-enis", Warning, "eni-leak in subnet-a, created 3h0m0s ago, 1 addresses, by i-dead", "delete-network-interface"},
		{"story 4: leaked ENIs with cleanup off", func(f *Facts) {
			f.Agent.Config["DISABLE_LEAKED_ENI_CLEANUP"] = "true"
			f.EC2.Leaked = []ENIFact{{ID: "eni-leak", SubnetID: "subnet-a", DeviceIndex: -1}}
		}, "leaked-enis", Warning, "no vpcnet.io/created-at tag", "DISABLE_LEAKED_ENI_CLEANUP=true"},
		{"story 4: a young available ENI next to a leak", func(f *Facts) {
			f.EC2.Leaked = []ENIFact{
				{ID: "eni-attaching", DeviceIndex: -1, Tags: map[string]string{cloud.TagCreatedAt: young}},
				{ID: "eni-leak", SubnetID: "subnet-a", DeviceIndex: -1, Tags: map[string]string{cloud.TagCreatedAt: now.Add(-time.Hour).Format(time.RFC3339)}},
			}
		}, "leaked-enis", Warning, "eni-leak in subnet-a, created 1h0m0s ago", "VPCNET_LEAKED_ENI_GRACE"},
		{"story 5: not ready", func(f *Facts) {
			f.Agent.Status.Ready = false
			f.Agent.Status.Conditions = []introspect.Condition{{Name: "cloud", OK: false, Message: "EC2 unreachable"}, {Name: "host", OK: true}}
			f.CNI.Files, f.CNI.Ours, f.CNI.StatusRan = nil, "", false
		}, "agent-not-ready", Error, "condition cloud: EC2 unreachable", "failing condition"},
		{"story 5: no CNI configuration", func(f *Facts) {
			f.Agent.Status.Ready = false
			f.CNI.Files, f.CNI.Ours, f.CNI.StatusRan = nil, "", false
		}, "cni-config-missing", Error, "files in /etc/cni/net.d: none", "VPCNET_CNI_CONF_DIR"},
		{"story 5: CNI STATUS fails", func(f *Facts) {
			f.CNI.StatusErr = "plugin type=\"vpcnet\" failed (status): vpcnetd is not ready"
		}, "cni-status-not-ready", Error, "vpcnetd is not ready", "socket"},
		{"story 5: taint left on a ready node", func(f *Facts) {
			f.Kube.Node.Taints = []string{"vpcnet.io/not-ready=true:NoSchedule"}
		}, "startup-taint-stuck", Error, "vpcnet.io/not-ready=true:NoSchedule", "kubectl taint nodes"},
		{"story 6: Node named differently", func(f *Facts) {
			f.Host.Hostname = "worker-7"
			f.Kube.FoundBy = "providerID"
		}, "node-name-mismatch", Warning, "host name worker-7", "MY_NODE_NAME"},
		{"story 6: agent reports a mismatch", func(f *Facts) {
			f.Agent.Status.Kubernetes.Mismatch = "MY_NODE_NAME=a but providerID names Node b"
		}, "node-name-mismatch", Warning, "providerID names Node b", "spec.nodeName"},
		{"story 6: no Node", func(f *Facts) {
			f.Kube.Node = nil
		}, "node-not-found", Error, "no Node has providerID aws:///ZONE/i-1", "journalctl -u kubelet"},
		{"story 7: role not in aws-auth", func(f *Facts) {
			f.Kube.Node = nil
			f.Kube.AWSAuth.RoleARNs = []string{"arn:aws:iam::1:role/other"}
		}, "node-role-not-mapped", Error, "instance role from IMDS: nodes", "rolearn: arn:aws:iam::ACCOUNT:role/nodes"},
		{"story 7: no aws-auth at all", func(f *Facts) {
			f.Kube.Node, f.Kube.AWSAuth = nil, nil
		}, "node-role-not-mapped", Error, "aws-auth does not exist", "access entry"},
		{"story 7: kubelet log", func(f *Facts) {
			f.Host.KubeletUnauthorized = `E1124 reflector.go: Unauthorized`
		}, "kubelet-unauthorized", Error, "Unauthorized", "aws-auth"},
		{"story 8: every free address cooling", func(f *Facts) {
			f.Agent.Status.Addresses = introspect.Counts{Total: 2, Assigned: 1, Cooling: 1}
			f.Agent.Status.NextFree = &cooling
			f.Agent.Status.Waiting = 1
		}, "addresses-cooling", Error, "1 cooling, 0 free", "12:00:25Z (in 25s)"},
		{"interfaces vpcnet does not own", func(f *Facts) {
			f.EC2.ENIs = append(f.EC2.ENIs,
				ENIFact{ID: "eni-efa", InterfaceType: "efa", DeviceIndex: 1},
				ENIFact{ID: "eni-x", InterfaceType: "interface", DeviceIndex: 2, Tags: map[string]string{TagNoManage: "true"}},
				ENIFact{ID: "eni-card1", InterfaceType: "interface", DeviceIndex: 0, NetworkCard: 1})
		}, "interfaces-unmanaged", Info, "eni-card1 (device 0) is on network card 1", "no_manage"},
		{"EC2 action denied", func(f *Facts) {
			f.EC2.DryRun["AttachNetworkInterface"] = "UnauthorizedOperation"
		}, "ec2-action-denied", Error, "ec2:AttachNetworkInterface: UnauthorizedOperation", "deploy/iam-policy.json"},
		{"aws-node leftovers", func(f *Facts) {
			f.Host.AWSNodeCheckpoint = "/var/run/aws-node/ipam.json"
			f.Host.Chains = append(f.Host.Chains, NFTChain{Family: "ip", Table: "nat", Chain: "AWS-SNAT-CHAIN-0"})
		}, "aws-node-leftovers", Warning, "ip nat AWS-SNAT-CHAIN-0", "iptables -t nat -F/-X AWS-SNAT-CHAIN-0"},
		{"aws-node still running", func(f *Facts) {
			f.Kube.AWSNodeDaemonSet = true
			f.CNI.Files = []string{"10-aws.conflist", "10-vpcnet.conflist"}
		}, "aws-node-leftovers", Error, "DaemonSet kube-system/aws-node exists", "delete daemonset aws-node"},
		{"aws-node's configuration sorts first", func(f *Facts) {
			f.CNI.Files = []string{"10-aws.conflist", "10-vpcnet.conflist"}
		}, "cni-config-shadowed", Error, "10-aws.conflist, 10-vpcnet.conflist", "remove 10-aws.conflist"},
		{"pods reach IMDS", func(f *Facts) {
			f.EC2.Metadata = &MetadataOptions{HTTPTokens: "optional", HopLimit: 2, HTTPEndpoint: "enabled"}
		}, "imds-reachable-from-pods", Warning, "HttpPutResponseHopLimit=2", "--http-put-response-hop-limit 1"},
		{"pods reach IMDS, seen without EC2's options", func(f *Facts) {
			f.EC2.Metadata = nil
			f.IMDS.V1Allowed = new(true)
		}, "imds-reachable-from-pods", Warning, "without a session token", "--http-tokens required"},
		{"NetworkPolicies with enforcement off", func(f *Facts) {
			f.Agent.Policy = &introspect.PolicyStatus{Source: "VPCNET_NETWORK_POLICY=off", Mode: "standard"}
			f.Kube.NetworkPolicies = new(3)
		}, "network-policy-unenforced", Error, "the API server lists 3 NetworkPolicy objects", "VPCNET_NETWORK_POLICY=on"},
		{"NetworkPolicies with enforcement off, counted by the agent", func(f *Facts) {
			f.Agent.Policy = &introspect.PolicyStatus{Source: "VPCNET_NETWORK_POLICY=off", Mode: "standard", Policies: 2}
			f.Kube = nil
		}, "network-policy-unenforced", Error, "the agent counts 2 NetworkPolicy objects", "chained with vpcnet"},
		{"NetworkPolicies with enforcement off, host unread", func(f *Facts) {
			f.Agent.Policy = &introspect.PolicyStatus{Source: "VPCNET_NETWORK_POLICY=off", Mode: "standard"}
			f.Host = nil
		}, "network-policy-unenforced", Warning, "could not look for a chained policy engine", "Calico in policy-only mode"},
		{"NetworkPolicy rules lag the API server", func(f *Facts) {
			pending := now.Add(-45 * time.Second)
			f.Agent.Policy.PendingSince = &pending
		}, "network-policy-behind", Warning, "pendingSince 2026-11-24T11:59:15Z (45s ago)", "vpcnet_policy_*"},
		{"NetworkPolicy rules not written", func(f *Facts) {
			pending := now.Add(-5 * time.Second)
			f.Agent.Policy.PendingSince = &pending
			f.Agent.Policy.LastError = "write NetworkPolicy rules: netlink receive: operation not permitted"
		}, "network-policy-behind", Error, "lastError write NetworkPolicy rules: netlink receive: operation not permitted", "NetworkPolicy rules not written"},
		{"NetworkPolicy watches not listed, standard", func(f *Facts) {
			f.Agent.Policy.Synced, f.Agent.Policy.Applied = false, time.Time{}
			f.Agent.Status.Conditions = []introspect.Condition{{Name: "cloud", OK: true, Since: now.Add(-2 * time.Minute)}}
			f.Agent.Status.Kubernetes = introspect.KubeState{Enabled: true, Reachable: true,
				LastError: `networkpolicies.networking.k8s.io is forbidden: User "system:serviceaccount:kube-system:vpcnet" cannot list resource "networkpolicies"`}
		}, "network-policy-not-synced", Error, "cannot list resource \"networkpolicies\"", "networkpolicies (networking.k8s.io), namespaces and pods"},
		{"NetworkPolicy watches not listed, strict", func(f *Facts) {
			pending := now.Add(-90 * time.Second)
			f.Agent.Policy.Synced, f.Agent.Policy.Mode, f.Agent.Policy.PendingSince = false, "strict", &pending
			f.Agent.Status.Kubernetes = introspect.KubeState{Enabled: true, LastError: "dial tcp 10.100.0.1:443: i/o timeout"}
		}, "network-policy-not-synced", Error, "API server not reachable: dial tcp 10.100.0.1:443: i/o timeout", "new pods are refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthy()
			tt.break_(&f)
			r := Diagnose(f)
			i := slices.IndexFunc(r.Findings, func(x Finding) bool { return x.ID == tt.id })
			if i < 0 {
				t.Fatalf("no finding %s; got %+v", tt.id, r.Findings)
			}
			got := r.Findings[i]
			if got.Severity != tt.sev {
				t.Errorf("severity %s, want %s", got.Severity, tt.sev)
			}
			if ev := strings.Join(got.Evidence, "\n"); !strings.Contains(ev, tt.evidence) {
				t.Errorf("evidence %q lacks %q", ev, tt.evidence)
			}
			if !strings.Contains(got.Fix, tt.fix) && !strings.Contains(got.What, tt.fix) {
				t.Errorf("fix %q (what %q) lacks %q", got.Fix, got.What, tt.fix)
			}
			if tt.sev == Error && !r.HasError() {
				t.Errorf("HasError = false with an error finding")
			}
		})
	}
}

// A startup taint on a node whose agent is not ready is how it should be:
// evidence for agent-not-ready, not a finding of its own.
func TestStartupTaintOnANotReadyNodeIsEvidenceNotAFinding(t *testing.T) {
	f := healthy()
	f.Agent.Status.Ready = false
	f.Kube.Node.Taints = []string{"vpcnet.io/not-ready:NoSchedule"}
	r := Diagnose(f)
	if slices.ContainsFunc(r.Findings, func(x Finding) bool { return x.ID == "startup-taint-stuck" }) {
		t.Errorf("startup-taint-stuck on a node that is not ready: %+v", r.Findings)
	}
	i := slices.IndexFunc(r.Findings, func(x Finding) bool { return x.ID == "agent-not-ready" })
	if i < 0 || !strings.Contains(strings.Join(r.Findings[i].Evidence, "\n"), "vpcnet.io/not-ready:NoSchedule") {
		t.Errorf("agent-not-ready does not show the taint: %+v", r.Findings)
	}
}

// Errors come first, so the first line a person reads is the worst.
func TestFindingsAreSortedBySeverityThenID(t *testing.T) {
	f := healthy()
	f.EC2.Metadata.HopLimit = 2
	f.EC2.DryRun["CreateTags"] = "UnauthorizedOperation"
	f.EC2.ENIs = append(f.EC2.ENIs, ENIFact{ID: "eni-efa", InterfaceType: "efa", DeviceIndex: 1})
	var ids []string
	for _, x := range Diagnose(f).Findings {
		ids = append(ids, x.ID)
	}
	want := []string{"ec2-action-denied", "imds-reachable-from-pods", "interfaces-unmanaged"}
	if !slices.Equal(ids, want) {
		t.Errorf("order %v, want %v", ids, want)
	}
}

// An ENI between its create and its attach is available for a moment;
// it is no leak.
func TestAFreshlyCreatedENIIsNotALeak(t *testing.T) {
	f := healthy()
	f.EC2.Leaked = []ENIFact{{ID: "eni-new", DeviceIndex: -1, Tags: map[string]string{cloud.TagCreatedAt: now.Add(-2 * time.Second).Format(time.RFC3339)}}}
	if r := Diagnose(f); len(r.Findings) != 0 {
		t.Errorf("findings for an ENI created 2s ago: %+v", r.Findings)
	}
}

// The NetworkPolicy findings name real trouble only: no policies to
// enforce, a chained engine enforcing them, a lag a burst of changes
// explains, an agent just started, or an agent too old to say.
func TestNetworkPolicyFindingsHoldForHealthyStates(t *testing.T) {
	tests := []struct {
		name   string
		change func(f *Facts)
	}{
		{"enforcement off, no policies", func(f *Facts) {
			f.Agent.Policy = &introspect.PolicyStatus{Source: "VPCNET_NETWORK_POLICY=off"}
			f.Kube.NetworkPolicies = new(0)
		}},
		{"enforcement off, Calico chained", func(f *Facts) {
			f.Agent.Policy = &introspect.PolicyStatus{Source: "VPCNET_NETWORK_POLICY=off", Policies: 3}
			f.Host.Chains = append(f.Host.Chains, NFTChain{Family: "ip", Table: "filter", Chain: "cali-FORWARD"})
		}},
		{"enforcement off, Cilium chained", func(f *Facts) {
			f.Agent.Policy = &introspect.PolicyStatus{Source: "VPCNET_NETWORK_POLICY=off", Policies: 3}
			f.Host.Chains = append(f.Host.Chains, NFTChain{Family: "ip", Table: "filter", Chain: "CILIUM_FORWARD"})
		}},
		{"a change 10s old", func(f *Facts) {
			pending := now.Add(-10 * time.Second)
			f.Agent.Policy.PendingSince = &pending
		}},
		{"watches listing for 20s", func(f *Facts) {
			f.Agent.Policy.Synced = false
			f.Agent.Status.Conditions = []introspect.Condition{{Name: "cloud", OK: true, Since: now.Add(-20 * time.Second)}}
		}},
		{"an agent without /v1/policy", func(f *Facts) {
			f.Agent.Policy = nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthy()
			tt.change(&f)
			for _, x := range Diagnose(f).Findings {
				if strings.HasPrefix(x.ID, "network-policy-") {
					t.Errorf("finding %s: %s %v", x.ID, x.What, x.Evidence)
				}
			}
		})
	}
}
