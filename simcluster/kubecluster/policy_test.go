package kubecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/simcluster"
)

// agentPolicy is a node's vpcnetd /v1/policy.
func agentPolicy(ctx context.Context, n *simcluster.Node, pod string) (introspect.PolicyStatus, error) {
	var st introspect.PolicyStatus
	path := "/v1/policy"
	if pod != "" {
		path += "?pod=" + pod
	}
	body, err := n.Get(ctx, path)
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(body, &st)
	return st, err
}

// hammerPod asks every address of the test subnet for port 8080 for
// seconds (testserver hammer), from node with labels.
func hammerPod(name, node string, labels map[string]string, seconds int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "hammer", Image: TestImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"hammer", "10.0.0.0/24", "8080", fmt.Sprint(seconds)},
			}},
		},
	}
}

// A pod's policy is in force from its first packet: clients that ask
// every address of the subnet, over and over, from before the pod exists
// until after it serves, see it never (the one the policy isolates it
// from) or always once it listens (the one it allows).
func TestAPolicyIsInForceFromAPodsFirstPacket(t *testing.T) {
	c := startCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	nodes := c.names("i-node1", "i-node2")
	if err := c.WaitNodesReady(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAddonsReady(ctx); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "target-from-allowed"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "target"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "allowed"}}},
			}}},
		},
	}
	if _, err := c.Client.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Sim.Nodes {
		if err := poll(ctx, "the policy known on "+n.ID, func() error {
			st, err := agentPolicy(ctx, n, "")
			if err != nil {
				return err
			}
			if !st.Enabled || !st.Synced || st.Policies != 1 {
				return fmt.Errorf("policy status %+v", st)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	pods := c.Client.CoreV1().Pods("default")
	const seconds = 50
	for _, p := range []*corev1.Pod{
		hammerPod("allowed", nodes[0], map[string]string{"role": "allowed"}, seconds),
		hammerPod("denied", nodes[0], map[string]string{"role": "denied"}, seconds),
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"allowed", "denied"} {
		if err := poll(ctx, name+" running", func() error {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return fmt.Errorf("phase %s, address %q", p.Status.Phase, p.Status.PodIP)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	target := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "target"}},
		Spec: corev1.PodSpec{
			NodeName: nodes[1], TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "web", Image: TestImage, ImagePullPolicy: corev1.PullNever,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	if _, err := pods.Create(ctx, target, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var targetIP string
	if err := poll(ctx, "target ready", func() error {
		p, err := pods.Get(ctx, "target", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				targetIP = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	}); err != nil {
		t.Fatal(err)
	}
	// The kubelet's readiness probe, from the node, passed although the
	// pod is isolated: node-local traffic is never judged.

	// What the target's node says of it.
	var node2 *simcluster.Node
	for _, n := range c.Sim.Nodes {
		if n.ID == "i-node2" {
			node2 = n
		}
	}
	st, err := agentPolicy(ctx, node2, "default/target")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pods) != 1 || st.Pods[0].Ingress == nil || len(st.Pods[0].Ingress.Policies) != 1 ||
		st.Pods[0].Ingress.Policies[0] != "default/target-from-allowed" || st.Pods[0].Egress != nil {
		t.Errorf("/v1/policy?pod=default/target = %+v; want ingress isolated by default/target-from-allowed, egress open", st)
	}

	logs := map[string]string{}
	for _, name := range []string{"allowed", "denied"} {
		if err := poll(ctx, name+" done", func() error {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodSucceeded {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		logs[name] = string(out)
	}
	okLine := "OK " + targetIP + " target "
	if !strings.Contains(logs["allowed"], okLine) {
		t.Errorf("the allowed client never reached the target at %s:\n%s", targetIP, logs["allowed"])
	}
	if strings.Contains(logs["allowed"], "LOST "+targetIP+" ") {
		t.Errorf("the allowed client lost the target after reaching it:\n%s", logs["allowed"])
	}
	if strings.Contains(logs["denied"], okLine) {
		t.Errorf("the client the policy isolates the target from reached it:\n%s", logs["denied"])
	}
	if !strings.Contains(logs["denied"], "DONE") || !strings.Contains(logs["allowed"], "DONE") {
		t.Errorf("a client did not finish its hammering:\nallowed:\n%s\ndenied:\n%s", logs["allowed"], logs["denied"])
	}
}

// A cluster whose vpcnet enforces nothing says so: the agent counts the
// NetworkPolicy objects it leaves unenforced, which doctor names.
func TestPoliciesNobodyEnforcesAreNamed(t *testing.T) {
	c := startCluster(t, func(o *Options) { o.AgentEnv = append(o.AgentEnv, "VPCNET_NETWORK_POLICY=off") })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := c.WaitNodesReady(ctx, c.names("i-node1", "i-node2")...); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := c.Client.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := c.Sim.Nodes[0]
	// The agent counted at start (no policies) and counts again every
	// five minutes; a restart is quicker: delete its pod.
	agents, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=vpcnet"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range agents.Items {
		if err := c.Client.CoreV1().Pods("kube-system").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var st introspect.PolicyStatus
	if err := poll(ctx, "the unenforced policy counted on "+n.ID, func() error {
		var err error
		st, err = agentPolicy(ctx, n, "")
		if err != nil {
			return err
		}
		if st.Enabled || st.Policies != 1 || !strings.Contains(st.Source, "VPCNET_NETWORK_POLICY=off") {
			return fmt.Errorf("policy status %+v", st)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// What vpcnetctl doctor makes of it.
	rep := doctor.Diagnose(doctor.Facts{Agent: &doctor.AgentFacts{Policy: &st}})
	found := false
	for _, f := range rep.Findings {
		found = found || f.ID == "network-policy-unenforced"
	}
	if !found {
		t.Errorf("doctor on the node's /v1/policy %+v finds %+v; want network-policy-unenforced", st, rep.Findings)
	}
}
