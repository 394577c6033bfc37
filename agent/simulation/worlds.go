package simulation

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/vpcnet/vpcnet/sim"
)

// world is a node a schedule runs on: the local cloud's topology and
// vpcnetd's settings there. Each seed plays on one, chosen by the seed
// (seed mod the number of worlds), so every run of schedules covers them
// all and a seed replays on the same node.
type world struct {
	name string
	topo *sim.Topology
	// env are vpcnetd's settings that differ from its defaults.
	env map[string]string
	// eligible are the subnets vpcnet may put a new ENI in.
	eligible map[string]bool
	// warm is how many free addresses the warm target keeps beyond the
	// pods' (WARM_ENI_TARGET × addresses per ENI), for I10; 0 where the
	// target is counted otherwise (prefixes) and I10 is not checked.
	warm int
}

// worldSpec is a world as written: its topology in the local cloud's
// YAML, the settings, and the subnets new ENIs may go to.
type worldSpec struct {
	name, topology string
	env            map[string]string
	eligible       []string
	warm           int
}

// worldSpecs are the nodes the schedules run on. Each is small, so its
// ENIs attach and detach often and its subnets run out.
var worldSpecs = []worldSpec{{
	// Secondary addresses, one subnet: the pool's common shape.
	name: "secondary-ips",
	topology: `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/26}
securityGroups: [sg-0sim]
instanceTypes: [{name: s3.sim, maxENIs: 3, ipv4PerENI: 5}]
instances:
- {id: i-sim, type: s3.sim, subnet: subnet-a}
attachDelay: 3s
detachDelay: 2s
imdsLag: 2s
seed: 1
`,
	env:      map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"},
	eligible: []string{"subnet-a"},
	warm:     4,
}, {
	// Prefix delegation on a /25 that EC2 fragments: addresses are
	// picked at random (as EC2 does) and another instance holds a
	// handful, so the free /28s run out while single addresses remain
	// and the agent falls back to secondary addresses.
	name: "prefixes-fragmented",
	topology: `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/25}
securityGroups: [sg-0sim]
instanceTypes: [{name: s3.sim, maxENIs: 3, ipv4PerENI: 5}]
instances:
- {id: i-sim, type: s3.sim, subnet: subnet-a}
- id: i-neighbour
  type: s3.sim
  subnet: subnet-a
  interfaces: [{deviceIndex: 1, secondaryAddresses: 4}]
addressOrder: random
attachDelay: 3s
detachDelay: 2s
imdsLag: 2s
seed: 1
`,
	env:      map[string]string{"ENABLE_SUBNET_DISCOVERY": "false", "ENABLE_PREFIX_DELEGATION": "true"},
	eligible: []string{"subnet-a"},
}, {
	// Tagged subnet discovery: the node's small subnet and two tagged
	// for the cluster are eligible; larger ones tagged 0, tagged for
	// another cluster only, untagged or in another zone are not.
	name: "subnet-discovery",
	topology: `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/28}
- {id: subnet-cni, az: us-west-2a, cidr: 10.0.1.0/28, tags: {kubernetes.io/role/cni: "1", cni.networking.k8s.aws/cluster/sim: "1"}}
- {id: subnet-cni2, az: us-west-2a, cidr: 10.0.2.0/27, tags: {kubernetes.io/role/cni: "1"}}
- {id: subnet-other, az: us-west-2a, cidr: 10.0.3.0/24, tags: {kubernetes.io/role/cni: "1", cni.networking.k8s.aws/cluster/other: "1"}}
- {id: subnet-off, az: us-west-2a, cidr: 10.0.4.0/24, tags: {kubernetes.io/role/cni: "0"}}
- {id: subnet-untagged, az: us-west-2a, cidr: 10.0.5.0/24}
- {id: subnet-b, az: us-west-2b, cidr: 10.0.6.0/24, tags: {kubernetes.io/role/cni: "1"}}
securityGroups: [sg-0sim]
instanceTypes: [{name: s3.sim, maxENIs: 3, ipv4PerENI: 5}]
instances:
- {id: i-sim, type: s3.sim, subnet: subnet-a}
attachDelay: 3s
detachDelay: 2s
imdsLag: 2s
seed: 1
`,
	env:      map[string]string{"ENABLE_SUBNET_DISCOVERY": "true", "CLUSTER_NAME": "sim"},
	eligible: []string{"subnet-a", "subnet-cni", "subnet-cni2"},
	warm:     4,
}, {
	// A type with two network cards, launched with an EFA interface on
	// card 1 and an ENI tagged no_manage on card 0: interfaces vpcnet
	// must leave alone, one of them taking a slot of its card.
	name: "multi-card-foreign",
	topology: `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/26}
securityGroups: [sg-0sim]
instanceTypes: [{name: s3.multi, maxENIs: 4, ipv4PerENI: 5, networkCards: [4, 1]}]
instances:
- id: i-sim
  type: s3.multi
  subnet: subnet-a
  interfaces:
  - {type: efa, networkCard: 1, deviceIndex: 0, secondaryAddresses: 1}
  - {deviceIndex: 1, secondaryAddresses: 2, tags: {node.k8s.amazonaws.com/no_manage: "true"}}
attachDelay: 3s
detachDelay: 2s
imdsLag: 2s
seed: 1
`,
	env:      map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"},
	eligible: []string{"subnet-a"},
	warm:     4,
}, {
	// aws-node's IPv6 mode on a dual-stack subnet: one /80 on the
	// primary ENI, asked for once (faults and crashes around that one
	// call), pods addressed from it, no warm pool, no ENI attached. The
	// subnet also assigns each ENI an IPv6 address on creation, which
	// is no pod's. A small IPv4 /26 that the IPv4 pool would exhaust
	// shows that no IPv4 address is taken either.
	name: "ipv6-prefix",
	topology: `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/26, ipv6Cidr: '2600:1f14:abc:de01::/64', assignIpv6AddressOnCreation: true}
securityGroups: [sg-0sim]
instanceTypes: [{name: s3.sim, maxENIs: 3, ipv4PerENI: 5}]
instances:
- {id: i-sim, type: s3.sim, subnet: subnet-a}
attachDelay: 3s
detachDelay: 2s
imdsLag: 2s
seed: 1
`,
	env:      map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "false", "ENABLE_PREFIX_DELEGATION": "true"},
	eligible: []string{"subnet-a"},
}}

// Worlds parses the nodes the schedules run on; a schedule's world is
// Worlds()[seed % len].
func Worlds() ([]*world, error) {
	var out []*world
	for _, s := range worldSpecs {
		topo, err := sim.ParseTopology([]byte(s.topology))
		if err != nil {
			return nil, fmt.Errorf("world %s: %w", s.name, err)
		}
		w := &world{name: s.name, topo: topo, env: maps.Clone(s.env), eligible: map[string]bool{}, warm: s.warm}
		for _, id := range s.eligible {
			w.eligible[id] = true
		}
		out = append(out, w)
	}
	return out, nil
}

// foreignInterface is an interface vpcnet must leave alone, as EC2 shows
// it: I8 says it keeps its attachment and its addresses.
type foreignInterface struct {
	card, device int
	status       string
	addrs        []netip.Addr
}

// foreignOf are the interfaces of the node at launch but its primary ENI:
// each world's launch interfaces are all of a kind vpcnet must not manage
// (another network card, not of type interface, tagged no_manage).
func foreignOf(ifs []sim.InterfaceInfo) map[string]foreignInterface {
	out := map[string]foreignInterface{}
	for _, i := range ifs {
		if i.NetworkCardIndex != 0 || i.DeviceIndex != 0 {
			out[i.ID] = foreignInterface{card: i.NetworkCardIndex, device: i.DeviceIndex, status: i.Status, addrs: slices.Clone(i.Addresses)}
		}
	}
	return out
}
