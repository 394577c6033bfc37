package kubecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/simcluster"
)

// podRecord is what a switch-over must not change about a running pod.
type podRecord struct {
	UID, IP, Node string
	Containers    []string // container IDs: a restart or a new sandbox changes them
}

func recordPods(ctx context.Context, c *Cluster, selector string) (map[string]podRecord, error) {
	list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := map[string]podRecord{}
	for _, p := range list.Items {
		r := podRecord{UID: string(p.UID), IP: p.Status.PodIP, Node: p.Spec.NodeName}
		for _, cs := range p.Status.ContainerStatuses {
			r.Containers = append(r.Containers, fmt.Sprintf("%s restarts=%d", cs.ContainerID, cs.RestartCount))
		}
		out[p.Name] = r
	}
	return out, nil
}

// streamPod holds one TCP connection to url's /stream for seconds.
func streamPod(name, node, url string, seconds int) *corev1.Pod {
	p := clientPod(name, node)
	p.Spec.Containers[0].Args = []string{"stream", url, fmt.Sprint(seconds)}
	return p
}

// TestSwitchFromAWSNodeKeepsEveryPod is the switch-over as an operator
// runs it, from the real Amazon VPC CNI: with aws-node's pods serving
// and one TCP connection streaming between pods on different nodes,
// aws-node's DaemonSet is deleted and vpcnet's installed. Then no pod is
// restarted or re-created and each keeps its address, the connection
// never went quiet for more than a second, no ENI was created or
// detached for the switch, vpcnet knows every pod aws-node wired, a new
// pod reaches an old one across nodes, and deleting a pod aws-node wired
// gives its address back to vpcnet's pool.
func TestSwitchFromAWSNodeKeepsEveryPod(t *testing.T) {
	dir := os.Getenv(envAWSNode)
	if dir == "" && os.Getenv(envKubeBin) != "" {
		t.Fatal(envAWSNode + " is not set: run the cluster tests with `make cluster-test`, which builds aws-node (make aws-node-bins)")
	}
	c := startCluster(t, func(o *Options) {
		o.SkipVpcnet = true
		o.AWSNode = &AWSNode{Dir: dir}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	if err := c.InstallAWSNode(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := c.names("i-node1", "i-node2")
	if err := c.WaitNodesReady(ctx, nodes...); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}
	if err := c.WaitAddonsReady(ctx); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}
	const replicas = 6
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, testDeployment("web", replicas), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before map[string]podRecord
	if err := poll(ctx, "6 web pods ready under aws-node", func() error {
		var err error
		if before, err = recordPods(ctx, c, "app=web"); err != nil {
			return err
		}
		ready := 0
		for _, r := range before {
			if r.IP != "" && len(r.Containers) == 1 && strings.HasPrefix(r.Containers[0], "containerd://") {
				ready++
			}
		}
		if ready != replicas {
			return fmt.Errorf("%d of %d running with an address", ready, replicas)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}
	byNode := map[string][]string{}
	for _, r := range before {
		byNode[r.Node] = append(byNode[r.Node], r.IP)
	}
	// The connection that must keep flowing: node1 to a pod on node2,
	// held for the whole switch.
	n1, n2 := nodes[0], nodes[1]
	pods := c.Client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, streamPod("stream", n1, "http://"+byNode[n2][0]+":8080/stream", 240), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "the stream connected", func() error {
		logs, err := pods.GetLogs("stream", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs), "CONNECTED") {
			return fmt.Errorf("not yet: %q", logs)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}

	// aws-node at its warm target first (WARM_ENI_TARGET=1, its manifest's:
	// a whole ENI's worth of free addresses, 9 on an m5.large), so what
	// the switch does to the ENIs is the switch's, not a pool still
	// growing. vpcnet keeps the same target.
	for id, name := range c.NodeNames {
		if err := poll(ctx, "aws-node at its warm target on "+id, func() error {
			free, err := freeSecondaries(ctx, c, id, name)
			if err != nil {
				return err
			}
			if free < 9 {
				return fmt.Errorf("%d free secondary addresses", free)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	enisBefore := map[string][]string{}
	for id := range c.NodeNames {
		ifs, err := c.Sim.Cloud.Interfaces(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ifs {
			enisBefore[id] = append(enisBefore[id], e.ID)
		}
		slices.Sort(enisBefore[id])
	}

	// The switch: aws-node's DaemonSet goes (its pods with it), vpcnet's
	// comes, as the README's procedure says.
	start := time.Now()
	bg := metav1.DeletePropagationBackground
	if err := c.Client.AppsV1().DaemonSets("kube-system").Delete(ctx, "aws-node", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "aws-node's pods gone", func() error {
		list, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=aws-node"})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallVpcnet(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Sim.Nodes {
		if err := poll(ctx, "vpcnet serving on "+n.ID, func() error {
			st, err := agentStatus(ctx, n)
			if err != nil {
				return err
			}
			if !st.Ready {
				return fmt.Errorf("not ready: %+v", st)
			}
			return nil
		}); err != nil {
			t.Fatalf("%v\n%s", err, c.diagnose())
		}
	}
	serving := time.Now()
	t.Logf("vpcnet serving on both nodes %s after aws-node's DaemonSet was deleted", serving.Sub(start).Round(time.Second))

	// Every pod as it was: same pod, same containers, same address.
	after, err := recordPods(ctx, c, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(before, after, func(a, b podRecord) bool {
		return a.UID == b.UID && a.IP == b.IP && a.Node == b.Node && slices.Equal(a.Containers, b.Containers)
	}) {
		t.Errorf("pods changed by the switch:\nbefore %v\n after %v", before, after)
	}
	// No ENI created or detached for it.
	for id, want := range enisBefore {
		ifs, err := c.Sim.Cloud.Interfaces(id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ifs {
			got = append(got, e.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: ENIs %v after the switch, %v before", id, got, want)
		}
	}
	// vpcnet holds every address aws-node gave a live pod, for that pod.
	for _, n := range c.Sim.Nodes {
		held, err := agentPods(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range before {
			if r.Node == c.NodeNames[n.ID] && held[r.IP] != "default/"+name {
				t.Errorf("%s: vpcnet holds %s for %q, aws-node gave it to default/%s", n.ID, r.IP, held[r.IP], name)
			}
		}
	}
	// A new pod, wired by vpcnet, reaches an old one across nodes.
	if err := runClient(ctx, c, clientPod("new-to-old", n2, "http://"+byNode[n1][0]+":8080/")); err != nil {
		t.Errorf("a pod vpcnet wired to a pod aws-node wired: %v", err)
	}

	// The stream held through it all.
	var phase corev1.PodPhase
	var finished time.Time
	if err := poll(ctx, "the stream ends", func() error {
		p, err := pods.Get(ctx, "stream", metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
				finished = cs[0].State.Terminated.FinishedAt.Time
			}
			return nil
		}
		return fmt.Errorf("phase %s", phase)
	}); err != nil {
		t.Fatal(err)
	}
	if !finished.After(serving) {
		t.Errorf("the stream ended at %s, before vpcnet served (%s): it did not span the switch", finished, serving)
	}
	logs, _ := pods.GetLogs("stream", &corev1.PodLogOptions{}).DoRaw(ctx)
	t.Logf("the connection across the switch: %s", strings.ReplaceAll(strings.TrimSpace(string(logs)), "\n", "; "))
	if phase != corev1.PodSucceeded {
		t.Errorf("the connection across the switch broke: %s", logs)
	}

	// A pod aws-node wired, deleted now: vpcnet's plugin takes it down
	// and its address comes back to the pool.
	var victim string
	for name, r := range before {
		if r.Node == n1 {
			victim = name
			break
		}
	}
	node1 := c.Sim.Nodes[0]
	for _, n := range c.Sim.Nodes {
		if c.NodeNames[n.ID] == n1 {
			node1 = n
		}
	}
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "the deleted pod's address given back by vpcnet", func() error {
		held, err := agentPods(ctx, node1)
		if err != nil {
			return err
		}
		if held[before[victim].IP] == "default/"+victim {
			return fmt.Errorf("%s still held for %s", before[victim].IP, victim)
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, c.diagnose())
	}
}

// agentPods is a node's vpcnetd /v1/pods: address to namespace/pod.
func agentPods(ctx context.Context, n *simcluster.Node) (map[string]string, error) {
	body, err := n.Get(ctx, "/v1/pods")
	if err != nil {
		return nil, err
	}
	var holds []introspect.Hold
	if err := json.Unmarshal(body, &holds); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, h := range holds {
		out[h.Address] = h.Pod
	}
	return out, nil
}

// freeSecondaries is how many secondary addresses of an instance's ENIs
// (EC2's view) no pod on its node has.
func freeSecondaries(ctx context.Context, c *Cluster, id, node string) (int, error) {
	ifs, err := c.Sim.Cloud.Interfaces(id)
	if err != nil {
		return 0, err
	}
	held := map[string]bool{}
	for _, e := range ifs {
		for _, a := range e.Addresses[1:] {
			held[a.String()] = true
		}
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	for _, p := range pods.Items {
		if !p.Spec.HostNetwork && held[p.Status.PodIP] {
			delete(held, p.Status.PodIP)
		}
	}
	return len(held), nil
}
