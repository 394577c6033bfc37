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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestSwitchFromAWSNodeAndBackKeepsEveryPod is the switch-over as an
// operator runs it, from the real Amazon VPC CNI and back: with pods
// serving and one TCP connection streaming between pods on different
// nodes, aws-node's DaemonSet is deleted and vpcnet's installed; later
// the same the other way. After each switch no pod is restarted or
// re-created and each keeps its address, the connection never went
// quiet for more than a second, no ENI was created or detached for it,
// the new CNI knows every pod the old one wired, and a pod it wires
// reaches an old one across nodes. After the switch to vpcnet, deleting a
// pod aws-node wired gives its address back to vpcnet's pool; after the
// switch back, aws-node restores from the checkpoint vpcnet left it and
// releases a pod vpcnet wired.
func TestSwitchFromAWSNodeAndBackKeepsEveryPod(t *testing.T) {
	dir := os.Getenv(envAWSNode)
	if dir == "" && os.Getenv(envKubeBin) != "" {
		t.Fatal(envAWSNode + " is not set: run the cluster tests with `make cluster-test`, which builds aws-node (make aws-node-bins)")
	}
	c := startCluster(t, func(o *Options) {
		o.SkipVpcnet = true
		o.AWSNode = &AWSNode{Dir: dir}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
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
	var first map[string]podRecord
	if err := poll(ctx, "6 web pods ready under aws-node", func() error {
		var err error
		if first, err = recordPods(ctx, c, "app=web"); err != nil {
			return err
		}
		ready := 0
		for _, r := range first {
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
	// The real aws-node at work: each pod has a secondary address of its
	// node's ENIs, as EC2 records them.
	for id, name := range c.NodeNames {
		ifs, err := c.Sim.Cloud.Interfaces(id)
		if err != nil {
			t.Fatal(err)
		}
		var secondaries []string
		for _, e := range ifs {
			for _, a := range e.Addresses[1:] {
				secondaries = append(secondaries, a.String())
			}
		}
		for pod, r := range first {
			if r.Node == name && !slices.Contains(secondaries, r.IP) {
				t.Errorf("pod %s on %s: %s is not a secondary address of %s's ENIs in EC2 (%v)", pod, name, r.IP, id, secondaries)
			}
		}
	}

	// To vpcnet.
	victim := switchOver(t, ctx, c, "vpcnet", func() error {
		bg := metav1.DeletePropagationBackground
		if err := c.Client.AppsV1().DaemonSets("kube-system").Delete(ctx, "aws-node", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			return err
		}
		if err := waitGone(ctx, c, "k8s-app=aws-node"); err != nil {
			return err
		}
		if err := c.InstallVpcnet(ctx); err != nil {
			return err
		}
		for _, n := range c.Sim.Nodes {
			if err := poll(ctx, "vpcnet serving on "+n.ID, func() error {
				st, err := agentStatus(ctx, n)
				if err != nil {
					return err
				}
				if !st.Ready {
					return fmt.Errorf("not ready: %+v", st.Conditions)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}, func(before map[string]podRecord) error {
		// vpcnet holds every address aws-node gave a live pod, for that pod.
		for _, n := range c.Sim.Nodes {
			held, err := agentPods(ctx, n)
			if err != nil {
				return err
			}
			for name, r := range before {
				if r.Node == c.NodeNames[n.ID] && held[r.IP] != "default/"+name {
					return fmt.Errorf("%s: vpcnet holds %s for %q, aws-node gave it to default/%s", n.ID, r.IP, held[r.IP], name)
				}
			}
		}
		return nil
	})
	// A pod aws-node wired, deleted now: vpcnet's plugin takes it down
	// and its address comes back.
	node := nodeOf(c, victim.Node)
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "the deleted pod's address given back by vpcnet", func() error {
		held, err := agentPods(ctx, node)
		if err != nil {
			return err
		}
		if held[victim.IP] == "default/"+victim.Name {
			return fmt.Errorf("%s still held for %s", victim.IP, victim.Name)
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, c.diagnose())
	}
	// The Deployment's replacement, wired by vpcnet, must be ready before
	// the switch back records the pods.
	if err := poll(ctx, "6 web pods ready under vpcnet", func() error {
		pods, err := recordPods(ctx, c, "app=web")
		if err != nil {
			return err
		}
		if len(pods) != replicas {
			return fmt.Errorf("%d pods", len(pods))
		}
		for name, r := range pods {
			if r.IP == "" || len(r.Containers) != 1 {
				return fmt.Errorf("%s not running", name)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}

	// And back to aws-node: vpcnet's agents leave it their checkpoint as
	// they stop.
	victim = switchOver(t, ctx, c, "aws-node", func() error {
		bg := metav1.DeletePropagationBackground
		if err := c.Client.AppsV1().DaemonSets("kube-system").Delete(ctx, "vpcnet", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			return err
		}
		if err := waitGone(ctx, c, "app.kubernetes.io/name=vpcnet"); err != nil {
			return err
		}
		if err := c.InstallAWSNode(ctx); err != nil {
			return err
		}
		return poll(ctx, "aws-node ready on every node", func() error {
			ds, err := c.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "aws-node", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ds.Status.NumberReady != int32(len(c.NodeNames)) {
				return fmt.Errorf("%d of %d ready", ds.Status.NumberReady, len(c.NodeNames))
			}
			return nil
		})
	}, func(before map[string]podRecord) error {
		// aws-node holds every address vpcnet gave a live pod, for that
		// pod: it restored them from the checkpoint vpcnet left.
		for _, n := range c.Sim.Nodes {
			held, err := awsNodePods(ctx, n)
			if err != nil {
				return err
			}
			for name, r := range before {
				if r.Node == c.NodeNames[n.ID] && held[r.IP] != "default/"+name {
					return fmt.Errorf("%s: aws-node holds %s for %q, vpcnet gave it to default/%s", n.ID, r.IP, held[r.IP], name)
				}
			}
		}
		return nil
	})
	// A pod vpcnet wired, deleted under aws-node: aws-node restored it
	// from the checkpoint vpcnet left, so its plugin's DEL releases it and
	// the pod's sandbox goes away cleanly.
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitPodGone(ctx, c, victim.Name); err != nil {
		t.Errorf("%v\n%s", err, c.diagnose())
	}
}

// switchOver runs one switch to the CNI named to, with a connection
// streaming across it, and checks what must not change. check adds the
// new CNI's own view of the pods. It returns the pod (the old CNI's) to
// delete next, on the first node.
func switchOver(t *testing.T, ctx context.Context, c *Cluster, to string, run func() error, check func(map[string]podRecord) error) namedPod {
	t.Helper()
	before, err := recordPods(ctx, c, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]string{}
	for _, r := range before {
		byNode[r.Node] = append(byNode[r.Node], r.IP)
	}
	nodes := c.names("i-node1", "i-node2")
	n1, n2 := nodes[0], nodes[1]
	pods := c.Client.CoreV1().Pods("default")
	stream := "stream-to-" + to
	if _, err := pods.Create(ctx, streamPod(stream, n1, "http://"+byNode[n2][0]+":8080/stream", 100), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, stream+" connected", func() error {
		logs, err := pods.GetLogs(stream, &corev1.PodLogOptions{}).DoRaw(ctx)
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
	// The pool at its warm target first (WARM_ENI_TARGET=1 in both
	// manifests: a whole ENI's worth of free addresses, 9 on an
	// m5.large), so what the switch does to the ENIs is the switch's,
	// not a pool still growing.
	for id, name := range c.NodeNames {
		if err := poll(ctx, "the pool at its warm target on "+id, func() error {
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
	enisBefore := enis(t, c)

	start := time.Now()
	if err := run(); err != nil {
		t.Fatalf("switch to %s: %v\n%s", to, err, c.diagnose())
	}
	serving := time.Now()
	t.Logf("%s serving on every node %s after the switch began", to, serving.Sub(start).Round(time.Second))

	// Every pod as it was: same pod, same containers, same address.
	after, err := recordPods(ctx, c, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(before, after, func(a, b podRecord) bool {
		return a.UID == b.UID && a.IP == b.IP && a.Node == b.Node && slices.Equal(a.Containers, b.Containers)
	}) {
		t.Errorf("pods changed by the switch to %s:\nbefore %v\n after %v", to, before, after)
	}
	// No ENI created or detached for it.
	if got := enis(t, c); !maps.EqualFunc(got, enisBefore, slices.Equal) {
		t.Errorf("ENIs after the switch to %s: %v, before: %v", to, got, enisBefore)
	}
	if err := check(before); err != nil {
		t.Error(err)
	}
	// A new pod, wired by the new CNI, reaches an old one across nodes.
	if err := runClient(ctx, c, clientPod("new-to-old-"+to, n2, "http://"+byNode[n1][0]+":8080/")); err != nil {
		t.Errorf("a pod %s wired to a pod wired before the switch: %v", to, err)
	}

	// The stream held through it all.
	var phase corev1.PodPhase
	var finished time.Time
	if err := poll(ctx, stream+" ends", func() error {
		p, err := pods.Get(ctx, stream, metav1.GetOptions{})
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
	logs, _ := pods.GetLogs(stream, &corev1.PodLogOptions{}).DoRaw(ctx)
	t.Logf("the connection across the switch to %s: %s", to, strings.ReplaceAll(strings.TrimSpace(string(logs)), "\n", "; "))
	if phase != corev1.PodSucceeded {
		t.Errorf("the connection across the switch to %s broke: %s", to, logs)
	}
	if !finished.After(serving) {
		t.Errorf("the stream ended at %s, before %s served (%s): it did not span the switch", finished, to, serving)
	}
	for name, r := range before {
		if r.Node == n1 {
			return namedPod{Name: name, podRecord: r}
		}
	}
	t.Fatalf("no web pod on %s", n1)
	return namedPod{}
}

type namedPod struct {
	Name string
	podRecord
}

// enis is each instance's ENI IDs, sorted, as EC2 has them.
func enis(t *testing.T, c *Cluster) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for id := range c.NodeNames {
		ifs, err := c.Sim.Cloud.Interfaces(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ifs {
			out[id] = append(out[id], e.ID)
		}
		slices.Sort(out[id])
	}
	return out
}

// waitGone waits until no kube-system pod matches selector.
func waitGone(ctx context.Context, c *Cluster, selector string) error {
	return poll(ctx, "pods "+selector+" gone", func() error {
		list, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
}

// waitPodGone waits until the default namespace's pod name is deleted:
// its sandbox torn down, the CNI's DEL answered.
func waitPodGone(ctx context.Context, c *Cluster, name string) error {
	return poll(ctx, "pod "+name+" deleted", func() error {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}

// nodeOf is the local cloud's node whose Kubernetes name is name.
func nodeOf(c *Cluster, name string) *simcluster.Node {
	for _, n := range c.Sim.Nodes {
		if c.NodeNames[n.ID] == name {
			return n
		}
	}
	return c.Sim.Nodes[0]
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

// awsNodePods is aws-node's view of a node's addresses (ipamd's
// introspection, /v1/enis on the same port as vpcnetd's): address to
// namespace/pod, for the addresses it has assigned.
func awsNodePods(ctx context.Context, n *simcluster.Node) (map[string]string, error) {
	body, err := n.Get(ctx, "/v1/enis")
	if err != nil {
		return nil, err
	}
	var cards map[string]struct {
		ENIs map[string]struct {
			AvailableIPv4Cidrs map[string]struct {
				IPAddresses map[string]struct {
					Address      string
					IPAMMetadata struct {
						Namespace string `json:"k8sPodNamespace"`
						Name      string `json:"k8sPodName"`
					}
				}
			}
		}
	}
	if err := json.Unmarshal(body, &cards); err != nil {
		return nil, fmt.Errorf("aws-node's /v1/enis: %w", err)
	}
	out := map[string]string{}
	for _, card := range cards {
		for _, eni := range card.ENIs {
			for _, cidr := range eni.AvailableIPv4Cidrs {
				for _, a := range cidr.IPAddresses {
					if a.IPAMMetadata.Name != "" {
						out[a.Address] = a.IPAMMetadata.Namespace + "/" + a.IPAMMetadata.Name
					}
				}
			}
		}
	}
	return out, nil
}
