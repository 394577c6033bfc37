package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// awsNodeEnv is the aws-node container's env in aws-node v1.23.2's own
// manifest (config/master/aws-k8s-cni.yaml), as an operator's cluster
// has it before a switch.
var awsNodeEnv = []corev1.EnvVar{
	{Name: "ADDITIONAL_ENI_TAGS", Value: "{}"}, {Name: "AWS_VPC_CNI_NODE_PORT_SUPPORT", Value: "true"},
	{Name: "AWS_VPC_ENI_MTU", Value: "9001"}, {Name: "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", Value: "false"},
	{Name: "AWS_VPC_K8S_CNI_EXTERNALSNAT", Value: "false"}, {Name: "AWS_VPC_K8S_CNI_LOGLEVEL", Value: "DEBUG"},
	{Name: "AWS_VPC_K8S_CNI_LOG_FILE", Value: "/host/var/log/aws-routed-eni/ipamd.log"},
	{Name: "AWS_VPC_K8S_CNI_RANDOMIZESNAT", Value: "prng"}, {Name: "AWS_VPC_K8S_CNI_VETHPREFIX", Value: "eni"},
	{Name: "AWS_VPC_K8S_PLUGIN_LOG_FILE", Value: "/var/log/aws-routed-eni/plugin.log"},
	{Name: "AWS_VPC_K8S_PLUGIN_LOG_LEVEL", Value: "DEBUG"}, {Name: "DISABLE_INTROSPECTION", Value: "false"},
	{Name: "DISABLE_METRICS", Value: "false"}, {Name: "DISABLE_NETWORK_RESOURCE_PROVISIONING", Value: "false"},
	{Name: "ENABLE_IMDS_ONLY_MODE", Value: "false"}, {Name: "ENABLE_IPv4", Value: "true"},
	{Name: "ENABLE_IPv6", Value: "false"}, {Name: "ENABLE_MULTI_NIC", Value: "false"},
	{Name: "ENABLE_POD_ENI", Value: "false"}, {Name: "ENABLE_PREFIX_DELEGATION", Value: "false"},
	{Name: "ENABLE_SUBNET_DISCOVERY", Value: "true"}, {Name: "NETWORK_POLICY_ENFORCING_MODE", Value: "standard"},
	{Name: "VPC_CNI_VERSION", Value: "v1.23.2"}, {Name: "WARM_ENI_TARGET", Value: "1"},
	{Name: "WARM_PREFIX_TARGET", Value: "1"},
	{Name: "AWS_SECRET_ACCESS_KEY", Value: "wJalrXUtnFEMI"},
	{Name: "MY_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
}

func awsNodeObjects(env []corev1.EnvVar) []runtime.Object {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-node"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "aws-node", Image: "amazon-k8s-cni:v1.23.2", Env: env}},
		}}},
	}
	agent := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"k8s-app": "aws-node"}},
			Spec: corev1.PodSpec{NodeName: node, HostNetwork: true}}
	}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ingress-0"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}}}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"},
		Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	return []runtime.Object{ds, agent("aws-node-a", "node-a"), agent("aws-node-b", "node-b"), web, plain}
}

// The pre-switch check on aws-node's own manifest: vpcnetd starts with
// every setting as it stands, the lines to copy are listed, and the pod
// whose hostPort stays with aws-node's rules is named.
func TestPreswitchOnAWSNodesOwnManifestIsReadyAndNamesTheHostPortPod(t *testing.T) {
	r, err := preswitch(context.Background(), fake.NewClientset(awsNodeObjects(awsNodeEnv)...), "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready() || len(r.Refused) > 0 {
		t.Errorf("aws-node's own settings refused: %v", r.Refused)
	}
	if r.Nodes != 2 || len(r.Settings) != len(awsNodeEnv)-1 || strings.Join(r.Unchecked, ",") != "MY_NODE_NAME" {
		t.Errorf("report %+v: want 2 nodes, %d settings, MY_NODE_NAME unchecked", r, len(awsNodeEnv)-1)
	}
	if strings.Join(r.HostPortPods, ",") != "shop/ingress-0 on node-a" {
		t.Errorf("hostPort pods %v, want shop/ingress-0 on node-a", r.HostPortPods)
	}
	var out bytes.Buffer
	if err := r.print(&out, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  WARM_ENI_TARGET=1\n", "  AWS_SECRET_ACCESS_KEY=(set; not shown)\n", "vpcnetd starts with these settings", "shop/ingress-0 on node-a", "ready to switch"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "wJalrXUtnFEMI") {
		t.Errorf("output shows a credential:\n%s", out.String())
	}
}

// A setting vpcnetd would stop at is named, with what to do instead,
// before anything is deleted, and the check exits 1.
func TestPreswitchNamesASettingVpcnetdWouldRefuse(t *testing.T) {
	env := slices.Clone(awsNodeEnv)
	for i := range env {
		if env[i].Name == "ENABLE_POD_ENI" {
			env[i].Value = "true" // security groups for pods
		}
	}
	r, err := preswitch(context.Background(), fake.NewClientset(awsNodeObjects(env)...), "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if r.Ready() || len(r.Refused) != 1 || !strings.HasPrefix(r.Refused[0], `ENABLE_POD_ENI="true": `) {
		t.Fatalf("refused %q, want ENABLE_POD_ENI=true alone", r.Refused)
	}
	var out bytes.Buffer
	if err := r.print(&out, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "not ready to switch") {
		t.Errorf("output does not say it is not ready:\n%s", out.String())
	}
}

// aws-node's IPv6 manifest (ENABLE_V4_EGRESS=true, its default) is
// valid for vpcnetd, which judges IPv6 pods' IPv4 egress by their egress
// policies too, also of the pods aws-node wired: nothing is refused,
// where it once was.
func TestPreswitchOfAnIPv6ClusterWithIPv4EgressAndNetworkPolicyIsReady(t *testing.T) {
	env := slices.Clone(awsNodeEnv)
	for i := range env {
		switch env[i].Name {
		case "ENABLE_IPv6", "ENABLE_PREFIX_DELEGATION":
			env[i].Value = "true"
		case "ENABLE_IPv4":
			env[i].Value = "false"
		}
	}
	r, err := preswitch(context.Background(), fake.NewClientset(awsNodeObjects(env)...), "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready() {
		t.Fatalf("refused %q, want an IPv6 cluster with IPv4 egress and NetworkPolicy ready to switch", r.Refused)
	}
	for i := range env {
		if env[i].Name == "ENABLE_V4_EGRESS" {
			env[i].Value = "false"
		}
	}
	if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "ENABLE_V4_EGRESS" }) {
		env = append(env, corev1.EnvVar{Name: "ENABLE_V4_EGRESS", Value: "false"})
	}
	r, err = preswitch(context.Background(), fake.NewClientset(awsNodeObjects(env)...), "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Ready() {
		t.Fatalf("refused %q, want an IPv6 cluster without IPv4 egress ready to switch", r.Refused)
	}
}

// Without aws-node there is nothing to switch from, and that is no error.
func TestPreswitchWithoutAWSNodeSaysSo(t *testing.T) {
	r, err := preswitch(context.Background(), fake.NewClientset(), "kube-system")
	if err != nil || r.DaemonSet != "" {
		t.Fatalf("report %+v, err %v", r, err)
	}
	var out bytes.Buffer
	_ = r.print(&out, "table")
	if !strings.Contains(out.String(), "no DaemonSet aws-node") {
		t.Errorf("output %q", out.String())
	}
}
