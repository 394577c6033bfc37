package kubecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/introspect"
)

const startupTaint = "node.vpcnet.io/agent-not-ready"

// TestStory5NotReadyUntilTheAgentIs: before vpcnet runs, the real kubelet
// reports the node NotReady (no CNI configuration), the startup taint is
// on it, and a pod bound to it gets no sandbox and no address; once
// vpcnet is installed, the node turns Ready, the agent removes the taint,
// and the pod starts with a VPC address.
func TestStory5NotReadyUntilTheAgentIs(t *testing.T) {
	c := startCluster(t, func(o *Options) { o.SkipVpcnet = true; o.StartupTaint = startupTaint })
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	name := c.NodeNames["i-node1"]
	nodes := c.Client.CoreV1().Nodes()
	pods := c.Client.CoreV1().Pods("default")

	pod := clientPod("early", name)
	pod.Spec.Containers[0].Args = nil // serve
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubelet has tried, and said why it cannot, before we judge.
	if err := poll(ctx, "the kubelet reports the network not ready", func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue && strings.Contains(cond.Message, "network") {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", n.Status.Conditions)
	}); err != nil {
		t.Fatal(err)
	}
	n, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(n, startupTaint) {
		t.Errorf("node %s: taints %v, want %s while the agent is not ready", name, n.Spec.Taints, startupTaint)
	}
	p, err := pods.Get(ctx, "early", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.PodIP != "" || p.Status.Phase == corev1.PodRunning {
		t.Errorf("pod on a node whose network is not ready: phase %s, address %q", p.Status.Phase, p.Status.PodIP)
	}

	if err := c.InstallVpcnet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "startup taint removed and the pod running", func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasTaint(n, startupTaint) {
			return fmt.Errorf("taint still on %s", name)
		}
		p, err := pods.Get(ctx, "early", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || !inSubnet(p.Status.PodIP) {
			return fmt.Errorf("pod %s, address %q", p.Status.Phase, p.Status.PodIP)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.diagnose())
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// TestStory6NodeNameIsNotPrivateDNSName: a kubelet registered under a
// custom name (not the instance's PrivateDnsName) still gets vpcnet, the
// agent finds its Node, and doctor, run in the agent's pod through the API
// server as an operator runs it, reports the mismatch.
func TestStory6NodeNameIsNotPrivateDNSName(t *testing.T) {
	c := startCluster(t, func(o *Options) { o.Nodes = map[string]NodeOptions{"i-node2": {Name: "custom-node2"}} })
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := c.WaitNodesReady(ctx, c.names("i-node1", "i-node2")...); err != nil {
		t.Fatal(err)
	}
	n2, err := c.Sim.Node("i-node2")
	if err != nil {
		t.Fatal(err)
	}
	var st introspect.Status
	if err := poll(ctx, "the agent on i-node2 finds its Node", func() error {
		body, err := n2.Get(ctx, "/v1/status")
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return err
		}
		if st.Kubernetes.Node != "custom-node2" {
			return fmt.Errorf("agent's Node %q (%s)", st.Kubernetes.Node, st.Kubernetes.NodeProblem)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent: node %s found by %s; mismatch: %s", st.Kubernetes.Node, st.Kubernetes.NodeFoundBy, st.Kubernetes.Mismatch)

	// kubectl vpcnet doctor NODE: vpcnetctl installed as kubectl-vpcnet.
	plugin := filepath.Join(t.TempDir(), "kubectl-vpcnet")
	if err := os.Symlink(filepath.Join(os.Getenv(envSimBin), "vpcnetctl"), plugin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, plugin, "doctor", "custom-node2", "--kubeconfig", c.Kubeconfig, "-o", "json").CombinedOutput()
	t.Logf("kubectl vpcnet doctor custom-node2:\n%s", out)
	if !strings.Contains(string(out), "node-name-mismatch") || !strings.Contains(string(out), ".us-west-2.compute.internal") {
		t.Errorf("doctor did not report the name mismatch with the PrivateDnsName (err %v)", err)
	}
}

// TestStory7KubeletNotAuthorized: a kubelet whose client certificate the
// cluster does not trust never registers a Node; doctor on that node,
// reading the kubelet's log and the API server, says why.
func TestStory7KubeletNotAuthorized(t *testing.T) {
	c := startCluster(t, func(o *Options) { o.Nodes = map[string]NodeOptions{"i-node2": {UntrustedCredential: true}} })
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := c.WaitNodesReady(ctx, c.names("i-node1")...); err != nil {
		t.Fatal(err)
	}
	kubeletLog := filepath.Join(c.NodeDir("i-node2"), "logs", "kubelet.log")
	if err := poll(ctx, "the kubelet on i-node2 is refused", func() error {
		data, _ := os.ReadFile(kubeletLog)
		if !strings.Contains(string(data), "Unauthorized") {
			return fmt.Errorf("no Unauthorized in %s yet", kubeletLog)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if n.Spec.ProviderID == "aws:///us-west-2a/i-node2" || n.Name == c.NodeNames["i-node2"] {
			t.Errorf("a Node %s appeared for the refused kubelet", n.Name)
		}
	}
	// No Node, so no agent pod: doctor runs on the node itself, as an
	// operator on the instance would run it.
	n2, err := c.Sim.Node("i-node2")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(os.Getenv(envSimBin), "vpcnetctl"), "doctor", "-o", "json",
		"--kubeconfig", c.VPCKubeconfig, "--kubelet-log", kubeletLog, "--skip", "agent,checkpoint,cni",
		"--ec2-endpoint", "http://"+fabric.EC2Address)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=local-cloud", "AWS_SECRET_ACCESS_KEY=local-cloud")
	var out []byte
	err = fabric.Do(n2.NetNS, func() error {
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	t.Logf("vpcnetctl doctor on i-node2:\n%s", out)
	for _, id := range []string{"kubelet-unauthorized", "node-not-found"} {
		if !strings.Contains(string(out), id) {
			t.Errorf("doctor on the refused node does not report %s (err %v)", id, err)
		}
	}
}
