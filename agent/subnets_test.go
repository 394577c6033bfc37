package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

// subnetsTopology: the node's subnet (a /24), subnets of its VPC and zone
// tagged kubernetes.io/role/cni=1 (a /22 and a /23), one tagged 0 and one
// untagged (both larger still), and a tagged one in another zone.
const subnetsTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-node, az: us-west-2a, cidr: 10.0.0.0/24, tags: {%s}}
- {id: subnet-cni-big, az: us-west-2a, cidr: 10.0.4.0/22, tags: {kubernetes.io/role/cni: "1"}}
- {id: subnet-cni-small, az: us-west-2a, cidr: 10.0.2.0/23, tags: {kubernetes.io/role/cni: "1"}}
- {id: subnet-cni-off, az: us-west-2a, cidr: 10.0.16.0/20, tags: {kubernetes.io/role/cni: "0"}}
- {id: subnet-untagged, az: us-west-2a, cidr: 10.0.32.0/20}
- {id: subnet-cni-2b, az: us-west-2b, cidr: 10.0.64.0/20, tags: {kubernetes.io/role/cni: "1"}}
securityGroups: [sg-default, sg-node]
instances:
- {id: i-node, type: m5.large, subnet: subnet-node, securityGroups: [sg-node]}
attachDelay: 20ms
imdsLag: 0s
seed: 1
`

func TestTaggedSubnetDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nodeTags   string
		env        map[string]string
		wantSubnet string
	}{
		// The tagged /22 has more free addresses than the node's /24.
		{"most free eligible subnet", "", nil, "subnet-cni-big"},
		{"discovery off", "", map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"}, "subnet-node"},
		// Tagged 1, the node's own subnet competes on free addresses;
		// the /22 still has more.
		{"node subnet tagged 1", `kubernetes.io/role/cni: "1"`, nil, "subnet-cni-big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldOf(t, fmt.Sprintf(subnetsTopology, tc.nodeTags))
			a := w.node("i-node", tc.env).start(t)
			a.waitReady(t)
			// The first pod makes the pool one ENI short.
			if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
				t.Fatal(err)
			}
			a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) == 2 })
			ifs, err := w.cloud.Interfaces("i-node")
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range ifs {
				if i.DeviceIndex == 0 {
					continue
				}
				if i.SubnetID != tc.wantSubnet {
					t.Errorf("new ENI %s in %s, want %s", i.ID, i.SubnetID, tc.wantSubnet)
				}
			}
			v, _ := a.view(context.Background())
			for _, e := range v.ENIs {
				if len(e.SecurityGroups) != 1 || e.SecurityGroups[0] != "sg-node" {
					t.Errorf("ENI %s has security groups %v, want the primary ENI's [sg-node]", e.ID, e.SecurityGroups)
				}
			}
		})
	}
}

// The node's own subnet tagged kubernetes.io/role/cni=0 is never used for
// new ENIs, even with room; with no other eligible subnet the pool does
// not grow, and says why.
func TestNodeSubnetTaggedZeroIsNotUsed(t *testing.T) {
	topo := `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-node, az: us-west-2a, cidr: 10.0.0.0/24, tags: {kubernetes.io/role/cni: "0"}}
- {id: subnet-untagged, az: us-west-2a, cidr: 10.0.32.0/20}
securityGroups: [sg-default]
instances: [{id: i-node, type: m5.large, subnet: subnet-node}]
attachDelay: 20ms
imdsLag: 0s
seed: 1
`
	w := newWorldOf(t, topo)
	a := w.node("i-node", nil).start(t)
	a.waitReady(t)
	if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
		t.Fatal(err)
	}
	a.reconcile(context.Background(), true)
	if n := w.callCount("CreateNetworkInterface"); n != 0 {
		t.Errorf("%d CreateNetworkInterface calls; no subnet is eligible", n)
	}
	v, _ := a.view(context.Background())
	if v.LastGrowErr == nil || !contains(v.LastGrowErr.Error(), "tagged kubernetes.io/role/cni=0") {
		t.Errorf("last growth error %v, want one naming the tag", v.LastGrowErr)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Issue 24: in a VPC shared by clusters, a subnet tagged for other
// clusters (cni.networking.k8s.aws/cluster/<name>, aws-node v1.22.1+) gets
// none of this cluster's ENIs (CLUSTER_NAME=sim), even with the most free
// addresses; one tagged for this cluster too does.
func TestASubnetTaggedForAnotherClusterGetsNoENI(t *testing.T) {
	topo := `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-node, az: us-west-2a, cidr: 10.0.0.0/24}
- {id: subnet-theirs, az: us-west-2a, cidr: 10.0.16.0/20, tags: {kubernetes.io/role/cni: "1", cni.networking.k8s.aws/cluster/other: "1"}}
- {id: subnet-shared, az: us-west-2a, cidr: 10.0.4.0/22, tags: {kubernetes.io/role/cni: "1", cni.networking.k8s.aws/cluster/other: "1", cni.networking.k8s.aws/cluster/sim: "1"}}
securityGroups: [sg-default]
instances: [{id: i-node, type: m5.large, subnet: subnet-node}]
attachDelay: 20ms
imdsLag: 0s
seed: 1
`
	w := newWorldOf(t, topo)
	a := w.node("i-node", nil).start(t)
	a.waitReady(t)
	if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
		t.Fatal(err)
	}
	a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) == 2 })
	ifs, err := w.cloud.Interfaces("i-node")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.DeviceIndex != 0 && i.SubnetID != "subnet-shared" {
			t.Errorf("new ENI %s in %s, want subnet-shared: subnet-theirs is another cluster's", i.ID, i.SubnetID)
		}
	}
}

// Issue 24: without subnet discovery new ENIs go to the node's own subnet,
// unless its tags keep them out, as aws-node checks (IsSubnetExcluded):
// then the pool does not grow, and says why.
func TestWithoutDiscoveryTheNodeSubnetsTagsStillCount(t *testing.T) {
	for _, tc := range []struct {
		name, tags, want string
	}{
		{"tagged 0", `kubernetes.io/role/cni: "0"`, "tagged kubernetes.io/role/cni=0"},
		{"another cluster's", `kubernetes.io/role/cni: "1", cni.networking.k8s.aws/cluster/other: "1"`, "tagged for cluster other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldOf(t, fmt.Sprintf(subnetsTopology, tc.tags))
			a := w.node("i-node", map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"}).start(t)
			a.waitReady(t)
			if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
				t.Fatal(err)
			}
			a.reconcile(context.Background(), true)
			if n := w.callCount("CreateNetworkInterface"); n != 0 {
				t.Errorf("%d CreateNetworkInterface calls; the node's subnet is %s", n, tc.name)
			}
			v, _ := a.view(context.Background())
			if v.LastGrowErr == nil || !contains(v.LastGrowErr.Error(), tc.want) || !contains(v.LastGrowErr.Error(), "ENABLE_SUBNET_DISCOVERY=false") {
				t.Errorf("last growth error %v, want one saying %q and naming ENABLE_SUBNET_DISCOVERY=false", v.LastGrowErr, tc.want)
			}
		})
	}
}
