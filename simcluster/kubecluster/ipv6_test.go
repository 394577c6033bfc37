package kubecluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vpcnet/vpcnet/sim"
)

// dualStackTopology is testTopology with an Amazon-provided IPv6 /56, a
// /64 for the subnet and an IPv6 address for every new ENI: the VPC of an
// EKS IPv6 cluster.
const dualStackTopology = `
region: us-west-2
vpc: {id: vpc-0kube6, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:6600::/56'}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, ipv6Cidr: '2600:1f14:abc:6601::/64', assignIpv6AddressOnCreation: true}
securityGroups: [sg-0kube]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: m5.large, subnet: subnet-a}
seed: 1
`

// TestIPv6ClusterOnRealKubelets: an IPv6 single-stack cluster on a
// dual-stack VPC, as EKS runs one: the kubelets register their IPv6
// addresses, the kubernetes and kube-dns Services are IPv6, vpcnet gives
// every pod an address of its node's /80, and a pod reaches a pod on the
// other node, a ClusterIP Service (kube-proxy in IPv6) and the Service by
// name (CoreDNS answering AAAA), all over IPv6, with vpcnet enforcing
// NetworkPolicy (CoreDNS forwards through the pods' IPv4 egress, the
// kubelets probe the pods): a policy isolating the pods then keeps the
// client out.
func TestIPv6ClusterOnRealKubelets(t *testing.T) {
	c := startCluster(t, func(o *Options) {
		topo, err := sim.ParseTopology([]byte(dualStackTopology))
		if err != nil {
			t.Fatal(err)
		}
		o.Sim.Topology = topo
		o.Family = IPv6
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	nodes := c.names("i-node1", "i-node2")
	if err := c.WaitNodesReady(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAddonsReady(ctx); err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]netip.Prefix{} // node name: its /80
	for id, name := range c.NodeNames {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip, err := netip.ParseAddr(a.Address); err != nil || !ip.Is6() {
					t.Errorf("node %s registered InternalIP %q, want its IPv6 address", name, a.Address)
				}
			}
		}
		ifs, err := c.Sim.Cloud.Interfaces(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range ifs {
			if i.DeviceIndex == 0 && len(i.IPv6Prefixes) == 1 {
				prefixes[name] = i.IPv6Prefixes[0]
			}
		}
		if len(ifs) != 1 || !prefixes[name].IsValid() {
			t.Errorf("node %s has %d ENIs and /80 %v; want its primary ENI alone with one /80", name, len(ifs), prefixes[name])
		}
	}
	for _, s := range []struct{ ns, name string }{{"default", "kubernetes"}, {"kube-system", "kube-dns"}} {
		svc, err := c.Client.CoreV1().Services(s.ns).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !c.ServiceRange().Contains(ip) {
			t.Errorf("Service %s/%s has ClusterIP %q, want one of %s", s.ns, s.name, svc.Spec.ClusterIP, c.ServiceRange())
		}
	}

	const replicas = 4
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, testDeployment("web", replicas), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]string{}
	if err := poll(ctx, "4 web pods ready", func() error {
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		ready := map[string][]string{}
		n := 0
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready[p.Spec.NodeName] = append(ready[p.Spec.NodeName], p.Status.PodIP)
					n++
				}
			}
		}
		if n != replicas {
			return fmt.Errorf("%d of %d ready", n, replicas)
		}
		byNode = ready
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}
	for node, ips := range byNode {
		for _, s := range ips {
			if ip, err := netip.ParseAddr(s); err != nil || !prefixes[node].Contains(ip) {
				t.Errorf("pod on %s has address %q, want one of its node's /80 %s", node, s, prefixes[node])
			}
		}
	}
	n1, n2 := nodes[0], nodes[1]
	if len(byNode[n1]) == 0 || len(byNode[n2]) == 0 {
		t.Fatalf("web pods by node: %v; want some on both", byNode)
	}
	svc, err := c.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	far := "http://" + net.JoinHostPort(byNode[n2][0], "8080") + "/"
	clusterIP := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	if err := runClient(ctx, c, clientPod("v6-client", n1, far, clusterIP, "http://web/")); err != nil {
		t.Errorf("pod on %s to %s, to the ClusterIP %s and to http://web/ (AAAA from CoreDNS): %v", n1, far, clusterIP, err)
	}

	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-from-nobody"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}}
	if _, err := c.Client.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Sim.Nodes {
		want := len(byNode[c.NodeNames[n.ID]])
		if err := poll(ctx, "the web pods isolated on "+n.ID, func() error {
			st, err := agentPolicy(ctx, n, "")
			if err != nil {
				return err
			}
			if !st.Enabled || !st.Synced || st.Policies != 1 || st.Isolated != want || st.PendingSince != nil {
				return fmt.Errorf("policy status %+v, want enforcing, %d pods isolated, nothing pending", st, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := runClient(ctx, c, clientPod("v6-denied", n1, far)); err == nil {
		t.Errorf("pod on %s reached %s, which a policy isolates from every pod", n1, far)
	}
}
