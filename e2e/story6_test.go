package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// Story 6: with the AWS cloud provider a node registers under a name that
// is not its host name. Here the Node of i-a is "worker-7" (found only by
// its providerID), and i-b's Node keeps a startup taint the agent, ready,
// never removed (story 5's last part). Doctor reports both.
func TestStory6NodeNamedDifferently(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kube := kubetest.Start(ctx, t)
	c := startCluster(t, twoNodes, nil)
	a, b := c.Nodes[0], c.Nodes[1]
	api, err := kube.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	taint := "vpcnet.io/agent-not-ready"
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-7"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + a.ID}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-5.us-west-2.compute.internal"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + b.ID,
			Taints: []corev1.Taint{{Key: taint, Effect: corev1.TaintEffectNoSchedule}}}},
	} {
		if _, err := api.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// What an operator (or a component going by host name) sees: no Node
	// by the host's name.
	if _, err := api.CoreV1().Nodes().Get(ctx, host, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Node named after the host %s: %v; the story needs none", host, err)
	}

	res := nodeFromOutside(t, c, a, kube, "").run(t, a)
	res.wantFinding(t, "node-name-mismatch", doctor.Warning, "Node worker-7, host name "+host, "MY_NODE_NAME")
	f := res.finding(t, "node-name-mismatch")
	if want := "found by providerID"; !strings.Contains(strings.Join(f.Evidence, "\n"), want) {
		t.Errorf("node-name-mismatch does not say how the Node was found (%q): %q", want, f.Evidence)
	}

	res = nodeFromOutside(t, c, b, kube, "").run(t, b, "--startup-taint", taint)
	res.wantFinding(t, "startup-taint-stuck", doctor.Error, taint+":NoSchedule", "kubectl taint nodes NODE "+taint+"-")
}
