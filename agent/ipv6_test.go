package agent

import (
	"context"
	"encoding/json"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

const dualStackTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, ipv6Cidr: '2600:1f14:abc:de01::/64'}
- {id: subnet-v4, az: us-west-2a, cidr: 10.0.16.0/20}
securityGroups: [sg-0sim]
instances:
- {id: i-v6, type: m5.large, subnet: subnet-a}
- {id: i-v4only, type: m5.large, subnet: subnet-v4}
- {id: i-xen, type: m4.large, subnet: subnet-a}
attachDelay: 0s
imdsLag: 0s
seed: 1
`

var ipv6Env = map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "false", "ENABLE_PREFIX_DELEGATION": "true"}

// A node that cannot run aws-node's IPv6 mode stops at start with one
// line naming what is missing and the fix, and has asked EC2 for nothing.
func TestIPv6ModeRefusesANodeThatCannotTakeAPrefixAndAssignsNothing(t *testing.T) {
	for _, tt := range []struct {
		instance string
		want     []string
	}{
		{"i-v4only", []string{"subnet subnet-v4 of the primary ENI has no IPv6 CIDR", "associate-subnet-cidr-block", "ENABLE_IPv6=false"}},
		{"i-xen", []string{"instance type m4.large is not a Nitro instance", "Nitro instance type", "ENABLE_IPv6=false"}},
	} {
		t.Run(tt.instance, func(t *testing.T) {
			w := newWorldOf(t, dualStackTopology)
			a, err := New(w.node(tt.instance, ipv6Env).options(t))
			if err != nil {
				t.Fatal(err)
			}
			err = a.Start(context.Background())
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Start = %v\nwant it to say %q", err, s)
				}
			}
			for _, action := range []string{"AssignIpv6Addresses", "AssignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface"} {
				if n := w.callCount(action); n != 0 {
					t.Errorf("%d %s calls, want none", n, action)
				}
			}
		})
	}
}

// aws-node's IPv6 mode through the whole agent: one /80 asked for once on
// the primary ENI, pods given addresses from it, no ENI attached, and a
// restart with no pod change makes no mutating EC2 call (I3).
func TestIPv6NodeGivesPodsAddressesFromOnePrimaryENIPrefixAskedForOnce(t *testing.T) {
	w := newWorldOf(t, dualStackTopology)
	n := w.node("i-v6", ipv6Env)
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	var prefix netip.Prefix
	held := map[ipam.Key]ipam.Assignment{}
	for i := range 40 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			prefix = as.Block
		}
		if !as.Addr.Is6() || as.Block != prefix || prefix.Bits() != 80 || !netip.MustParsePrefix("2600:1f14:abc:de01::/64").Contains(as.Addr) {
			t.Fatalf("pod %d got %s from %s, want an address of one /80 in the subnet's /64", i, as.Addr, as.Block)
		}
		held[key(i)] = as
	}
	if got := w.callCount("AssignIpv6Addresses"); got != 1 {
		t.Errorf("%d AssignIpv6Addresses calls, want 1", got)
	}
	for _, action := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface", "UnassignIpv6Addresses"} {
		if got := w.callCount(action); got != 0 {
			t.Errorf("%d %s calls, want none in IPv6 mode", got, action)
		}
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, action := range []string{"AssignIpv6Addresses", "AssignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface", "UnassignIpv6Addresses", "UnassignPrivateIpAddresses"} {
		before[action] = w.callCount(action)
	}
	b := n.start(t)
	b.waitReady(t)
	for k, as := range held {
		got, err := b.Add(ctx, k, ipam.Pod{})
		if err != nil || got.Addr != as.Addr {
			t.Errorf("after restart %s holds %v (%v), want %s", k, got.Addr, err, as.Addr)
		}
	}
	for action, n := range before {
		if got := w.callCount(action); got != n {
			t.Errorf("restart made %d %s calls, want none", got-n, action)
		}
	}
}

// A node switching from aws-node's IPv6 mode whose instance type's limits
// cannot be read (not in the table, DescribeInstanceTypes failing) still
// starts: the /80 aws-node left on the primary ENI shows the type takes
// prefixes, and is used with no EC2 change.
func TestIPv6NodeWithUnknownLimitsTrustsThePrefixAlreadyThere(t *testing.T) {
	w := newWorldOf(t, unknownTypeTopology())
	ifs, err := w.cloud.Interfaces("i-x9")
	if err != nil {
		t.Fatal(err)
	}
	out, err := simtest.EC2Client(w.cloud.EC2Handler(), "i-x9").AssignIpv6Addresses(context.Background(), &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(ifs[0].ID), Ipv6PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	prefix := netip.MustParsePrefix(out.AssignedIpv6Prefixes[0])
	w.cloud.SetFault("DescribeInstanceTypes", sim.Fault{ErrorRate: 1, Code: "InternalError"})
	before := w.callCount("AssignIpv6Addresses")
	a := w.node("i-x9", ipv6Env).start(t)
	a.waitReady(t)
	as, err := a.Add(context.Background(), key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	if as.Block != prefix {
		t.Errorf("pod got %s from %s, want an address of the prefix already there, %s", as.Addr, as.Block, prefix)
	}
	if n := w.callCount("AssignIpv6Addresses") - before; n != 0 {
		t.Errorf("%d AssignIpv6Addresses calls, want none", n)
	}
}

// unknownTypeTopology is dualStackTopology with i-x9, of a type vpcnetd's
// table lacks.
func unknownTypeTopology() string {
	topo := strings.Replace(dualStackTopology, "securityGroups: [sg-0sim]", "securityGroups: [sg-0sim]\ninstanceTypes: [{name: x9.sim, maxENIs: 2, ipv4PerENI: 4}]", 1)
	return strings.Replace(topo, "- {id: i-xen, type: m4.large, subnet: subnet-a}", "- {id: i-x9, type: x9.sim, subnet: subnet-a}", 1)
}

// With the type's limits unknown and no prefix attached, the agent cannot
// tell whether EC2 would give one: it says so, and what to allow.
func TestIPv6NodeWithUnknownLimitsAndNoPrefixSaysWhatToAllow(t *testing.T) {
	w := newWorldOf(t, unknownTypeTopology())
	w.cloud.SetFault("DescribeInstanceTypes", sim.Fault{ErrorRate: 1, Code: "InternalError"})
	a, err := New(w.node("i-x9", ipv6Env).options(t))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot tell whether instance type x9.sim takes the /80 prefix") || !strings.Contains(err.Error(), "ec2:DescribeInstanceTypes") {
		t.Fatalf("Start = %v", err)
	}
	if n := w.callCount("AssignIpv6Addresses"); n != 0 {
		t.Errorf("%d AssignIpv6Addresses calls, want none", n)
	}
}

// An IPv6 pod's hostPorts are mapped to its IPv6 address, and go with
// it; a mapping for an IPv4 host address cannot apply to it and is left
// out, as portmap leaves out the other family's.
func TestIPv6PodsHostPortsAreMappedToItsIPv6Address(t *testing.T) {
	w := newWorldOf(t, dualStackTopology)
	n := w.node("i-v6", ipv6Env)
	a := n.start(t)
	a.waitReady(t)
	c := &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
	ctx := context.Background()
	ports := append(slices.Clone(port8080), agentapi.PortMapping{HostPort: 53, ContainerPort: 53, Protocol: "udp", HostIp: "10.0.0.10"})
	add, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "web", PortMappings: ports})
	if err != nil {
		t.Fatal(err)
	}
	if !netip.MustParseAddr(add.Address).Is6() {
		t.Fatalf("the pod got %s, want an IPv6 address", add.Address)
	}
	want := add.Address + " *:8080/tcp->80"
	if got := n.ports.rules(); len(got) != 1 || got[0] != want {
		t.Fatalf("rules after Add = %v, want [%s]", got, want)
	}
	if _, err := c.Del(ctx, &agentapi.DelRequest{Attachment: web("c1")}); err != nil {
		t.Fatal(err)
	}
	if got := n.ports.rules(); len(got) != 0 {
		t.Errorf("rules after Del = %v, want none", got)
	}
}

// An IPv6 node chains vpcnet-egress-v4 right after vpcnet, as aws-node
// chains egress-cni in IPv6 mode, with aws-node's values: SNAT to the
// node's primary IPv4 address, the pods' MTU, 169.254.172.0/22 from
// host-local in aws-node's data directory. ENABLE_V4_EGRESS=false chains
// nothing (aws-node renders the entry disabled, which passes the result
// through: the same pods, one process fewer).
func TestIPv6NodeChainsTheIPv4EgressPluginUnlessV4EgressIsOff(t *testing.T) {
	for _, tt := range []struct {
		egress string
		want   []string
	}{
		{"", []string{"vpcnet", cniconf.EgressV4Type}},
		{"true", []string{"vpcnet", cniconf.EgressV4Type}},
		{"false", []string{"vpcnet"}},
	} {
		t.Run("ENABLE_V4_EGRESS="+tt.egress, func(t *testing.T) {
			env := maps.Clone(ipv6Env)
			if tt.egress != "" {
				env["ENABLE_V4_EGRESS"] = tt.egress
			}
			w := newWorldOf(t, dualStackTopology)
			n := w.node("i-v6", env)
			a := n.start(t)
			a.waitReady(t)
			path := filepath.Join(n.env["VPCNET_CNI_CONF_DIR"], "10-vpcnet.conflist")
			waitConf(t, path)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var conf struct {
				Plugins []json.RawMessage `json:"plugins"`
			}
			if err := json.Unmarshal(data, &conf); err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, raw := range conf.Plugins {
				var p cniconf.EgressV4Conf
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Fatal(err)
				}
				types = append(types, p.Type)
				if p.Type != cniconf.EgressV4Type {
					continue
				}
				want := cniconf.EgressV4(instancePrimaryIP(t, w, "i-v6"), 9001, "prng")
				if !reflect.DeepEqual(p, want) {
					t.Errorf("egress entry\n%+v\nwant aws-node's\n%+v", p, want)
				}
			}
			if !slices.Equal(types, tt.want) {
				t.Errorf("plugins %v, want %v", types, tt.want)
			}
		})
	}
}

func instancePrimaryIP(t *testing.T, w *world, id string) netip.Addr {
	t.Helper()
	for _, in := range w.cloud.Instances() {
		if in.ID == id {
			return in.PrivateIP
		}
	}
	t.Fatalf("no instance %s", id)
	return netip.Addr{}
}
