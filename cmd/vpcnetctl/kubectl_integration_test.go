package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vpcnet/vpcnet/agentexec"
	"github.com/vpcnet/vpcnet/agentexec/agentexectest"
	"github.com/vpcnet/vpcnet/deploy"
	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// kubectl vpcnet as an operator runs it: a kubeconfig for a user bound to
// vpcnet-operator, a real API server, and the node's kubelet (a fake that
// answers the exec as vpcnetctl in the agent's container would).
func TestKubectlVpcnetStatusDoctorAndPolicyReachTheNodesAgentThroughTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := kubetest.Start(ctx, t)
	if err := c.Apply(ctx, deploy.Manifests()); err != nil {
		t.Fatal(err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ns := c.TestNamespace(t)
	id := fmt.Sprintf("%06x", rand.Uint32()>>8)
	for _, sa := range []string{"oncall", "nobody"} {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vpcnet-operators"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vpcnet-operator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "oncall", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubelet := agentexectest.NewKubelet(t, `{"ready":false}`+"\n", exitFailed)
	node := "ip-10-0-0-1-" + id
	n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = kubelet.Port(t)
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	podLabels, err := labels.ConvertSelectorToLabelsMap(agentexec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "vpcnet-", Labels: podLabels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: agentexec.Container, Image: "ghcr.io/vpcnet/vpcnet:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	kubeconfig := func(sa string) string {
		rc, err := c.ServiceAccountConfig(ctx, ns, sa)
		if err != nil {
			t.Fatal(err)
		}
		return writeKubeconfig(t, rc)
	}
	oncall, nobody := kubeconfig("oncall"), kubeconfig("nobody")
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantOut   string
		wantErr   string
		wantExecs []string
	}{
		{"the agent's answer and exit code come back", []string{"status", node, "-o", "json", "--kubeconfig", oncall, "-n", ns},
			exitFailed, `{"ready":false}`, "", []string{ns + "/" + pod.Name + "/vpcnet: vpcnetctl status -o json"}},
		{"doctor runs in the node's agent pod", []string{"doctor", node, "-o", "json", "--kubeconfig", oncall, "-n", ns},
			exitFailed, `{"ready":false}`, "", []string{ns + "/" + pod.Name + "/vpcnet: vpcnetctl doctor -o json"}},
		{"policy asks the node's agent about the pod", []string{"policy", node, "default/web-1", "-o", "json", "--kubeconfig", oncall, "-n", ns},
			exitFailed, `{"ready":false}`, "", []string{ns + "/" + pod.Name + "/vpcnet: vpcnetctl policy default/web-1 -o json"}},
		{"no agent pod on the node", []string{"doctor", "ip-10-9-9-9-" + id, "--kubeconfig", oncall, "-n", ns},
			exitUnreachable, "", `no vpcnet agent pod on node "ip-10-9-9-9-` + id + `"`, nil},
		{"a user without vpcnet-operator", []string{"status", node, "--kubeconfig", nobody, "-n", ns},
			exitUnreachable, "", "forbidden", nil},
	}
	seen := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runKubectl(ctx, tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.wantOut) || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", &stdout, &stderr, tt.wantOut, tt.wantErr)
			}
			execs := kubelet.Execs()[seen:]
			seen += len(execs)
			if !slices.Equal(execs, tt.wantExecs) {
				t.Errorf("the kubelet ran %q, want %q", execs, tt.wantExecs)
			}
		})
	}
}

// writeKubeconfig writes rc as a kubeconfig file, as an operator has one.
func writeKubeconfig(t *testing.T, rc *rest.Config) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
