package kubecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/simcluster"
)

// TestDeploymentOnRealKubelets: a Deployment of 12 pods over two real
// kubelets gets VPC addresses from the nodes' ENIs, pods reach each other
// across nodes and through a ClusterIP Service (kube-proxy, nftables), and
// deleting the Deployment returns every address to the nodes' pools.
func TestDeploymentOnRealKubelets(t *testing.T) {
	c := startCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	nodes := c.names("i-node1", "i-node2")
	if err := c.WaitNodesReady(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	// CoreDNS's pods hold addresses of their own: the Deployment's must
	// come back to what the nodes held before it.
	if err := c.WaitAddonsReady(ctx); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, n := range c.Sim.Nodes {
		st, err := agentStatus(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		before[n.ID] = st.Addresses.Assigned
	}
	for id, name := range c.NodeNames {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "aws:///us-west-2a/" + id; n.Spec.ProviderID != want {
			t.Errorf("node %s: providerID %q, want %q", name, n.Spec.ProviderID, want)
		}
	}

	const replicas = 12
	deps := c.Client.AppsV1().Deployments("default")
	if _, err := deps.Create(ctx, testDeployment("web", replicas), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	if err := poll(ctx, "12 web pods ready", func() error {
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != replicas {
			return fmt.Errorf("%d of %d ready", ready, replicas)
		}
		pods = list.Items
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}

	// Every pod has its own address from its node's ENIs, as EC2 says.
	byNode := map[string][]string{}
	seen := map[string]bool{}
	for _, p := range pods {
		ip := p.Status.PodIP
		if !inSubnet(ip) || seen[ip] {
			t.Errorf("pod %s on %s: address %q is not a unique address of the VPC subnet", p.Name, p.Spec.NodeName, ip)
		}
		seen[ip] = true
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], ip)
	}
	for id, name := range c.NodeNames {
		if len(byNode[name]) == 0 {
			t.Fatalf("no web pod on %s (%s): %v", name, id, byNode)
		}
		ifs, err := c.Sim.Cloud.Interfaces(id)
		if err != nil {
			t.Fatal(err)
		}
		var eniAddrs []string
		for _, e := range ifs {
			for _, a := range e.Addresses[1:] {
				eniAddrs = append(eniAddrs, a.String())
			}
		}
		for _, ip := range byNode[name] {
			if !slices.Contains(eniAddrs, ip) {
				t.Errorf("pod address %s on %s is not a secondary address of %s's ENIs in EC2 (%v)", ip, name, id, eniAddrs)
			}
		}
	}
	t.Logf("pods by node: %v", byNode)

	// The EC2 budget controller (deploy/vpcnet.yaml's vpcnet-budget)
	// runs on the kubelets, holds its Lease, and answers every agent:
	// they find it through the Lease and prove who they are with their
	// service account tokens (the subnet-pressure poll asks it every
	// reconcile interval, whether or not the pool grows).
	if err := poll(ctx, "the budget controller leads and answers every agent", func() error {
		l, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, "vpcnet-budget", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease kube-system/vpcnet-budget has no holder")
		}
		for _, n := range c.Sim.Nodes {
			body, err := n.Get(ctx, "/v1/status")
			if err != nil {
				return err
			}
			var st introspect.Status
			if err := json.Unmarshal(body, &st); err != nil {
				return err
			}
			if b := st.Budget; b == nil || b.Answered == 0 {
				return fmt.Errorf("%s: budget %+v: the controller (%s) has not answered it yet", n.ID, b, *l.Spec.HolderIdentity)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, c.diagnose())
	}

	// Pod to pod across nodes, both ways.
	n1, n2 := nodes[0], nodes[1]
	if err := runClient(ctx, c, clientPod("from-node1", n1, "http://"+byNode[n2][0]+":8080/")); err != nil {
		t.Errorf("node1 pod to node2 pod: %v", err)
	}
	if err := runClient(ctx, c, clientPod("from-node2", n2, "http://"+byNode[n1][0]+":8080/")); err != nil {
		t.Errorf("node2 pod to node1 pod: %v", err)
	}

	// Pod to a ClusterIP Service, through kube-proxy's nftables rules.
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
	if err := runClient(ctx, c, clientPod("to-service", n1, "http://"+svc.Spec.ClusterIP+"/")); err != nil {
		t.Errorf("pod to ClusterIP %s: %v", svc.Spec.ClusterIP, err)
	}

	// Deleting returns the addresses.
	fg := metav1.DeletePropagationForeground
	if err := deps.Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"from-node1", "from-node2", "to-service"} {
		if err := c.Client.CoreV1().Pods("default").Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Sim.Nodes {
		if err := poll(ctx, "addresses of "+n.ID+" returned", func() error {
			st, err := agentStatus(ctx, n)
			if err != nil {
				return err
			}
			if st.Addresses.Assigned != before[n.ID] {
				return fmt.Errorf("%d addresses assigned, %d before the Deployment", st.Addresses.Assigned, before[n.ID])
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
}

// agentStatus is a node's vpcnetd /v1/status.
func agentStatus(ctx context.Context, n *simcluster.Node) (introspect.Status, error) {
	var st introspect.Status
	body, err := n.Get(ctx, "/v1/status")
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(body, &st)
	return st, err
}
