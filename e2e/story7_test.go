package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// Story 7: the node's role was missing from aws-auth; kubelet logged
// Unauthorized and the node never joined. Here aws-auth maps another
// role, no Node exists for the instance, and kubelet's log has the
// refusal; doctor names the role from IMDS and the missing mapping.
func TestStory7NodeRoleNotInAWSAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kube := kubetest.Start(ctx, t)
	c := startCluster(t, twoNodes, nil)
	n := c.Nodes[0]
	api, err := kube.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: "kube-system"},
		Data: map[string]string{"mapRoles": `- rolearn: arn:aws:iam::123456789012:role/other-nodes
  username: system:node:{{EC2PrivateDNSName}}
  groups: [system:bootstrappers, system:nodes]
`},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What the operator sees: the node never appears.
	nodes, err := api.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 0 {
		t.Fatalf("Nodes: %v %v; the story needs none", nodes, err)
	}
	kubeletLog := filepath.Join(t.TempDir(), "kubelet.log")
	if err := os.WriteFile(kubeletLog, []byte(
		"I1124 10:00:00.000000 1234 kubelet.go:1500] Attempting to register node\n"+
			"E1124 10:00:01.000000 1234 kubelet_node_status.go:96] \"Unable to register node with API server\" err=\"Unauthorized\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	res := nodeFromOutside(t, c, n, kube, "eks-nodes").run(t, n, "--kubelet-log", kubeletLog)
	res.wantFinding(t, "node-not-found", doctor.Error, "no Node has providerID aws:///ZONE/"+n.ID, "Unauthorized")
	res.wantFinding(t, "node-role-not-mapped", doctor.Error, "instance role from IMDS: eks-nodes", "rolearn: arn:aws:iam::ACCOUNT:role/eks-nodes")
	res.wantFinding(t, "kubelet-unauthorized", doctor.Error, `err="Unauthorized"`, "mapRoles")
}
