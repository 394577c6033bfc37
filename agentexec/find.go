// Package agentexec reaches a node's vpcnet agent through the Kubernetes
// API server, for `kubectl vpcnet status|doctor NODE`: it finds the
// DaemonSet's pod on the node and runs vpcnetctl inside its container
// (pods/exec).
//
// Exec, not the API server's pod proxy: the agent serves introspection on
// loopback only (INTROSPECTION_BIND_ADDRESS, 127.0.0.1:61679), because it
// shows every pod's address and the DaemonSet runs with hostNetwork, so a
// non-loopback bind would expose it to the whole VPC. The pod proxy dials
// the pod's IP, which for a hostNetwork pod is the node's address, and
// cannot reach loopback. Exec runs vpcnetctl (in the image for this) in
// the agent's container, which shares the node's network namespace, so it
// reads the agent as `vpcnetctl status` on the node would, and doctor
// sees the node's routes, rules and nftables.
package agentexec

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Where deploy/vpcnet.yaml runs the agent (a test holds them to it).
const (
	Namespace = "kube-system"
	// Selector is the DaemonSet's pod selector.
	Selector = "app.kubernetes.io/name=vpcnet"
	// Container is the agent's container, which has vpcnetctl.
	Container = "vpcnet"
)

// FindAgentPod returns the agent's pod on node: one list call, filtered
// by the API server on the DaemonSet's label and spec.nodeName (RBAC:
// list pods in the namespace). When the node has several (a rollout
// replacing one), a running pod wins, then the newest.
func FindAgentPod(ctx context.Context, cs kubernetes.Interface, namespace, node string) (*corev1.Pod, error) {
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: Selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list vpcnet agent pods on node %s (namespace %s, label %s): %w", node, namespace, Selector, err)
	}
	if len(list.Items) == 0 {
		return nil, &NoAgentError{Node: node, Namespace: namespace}
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		if ar, br := a.Status.Phase == corev1.PodRunning, b.Status.Phase == corev1.PodRunning; ar != br {
			if ar {
				return -1
			}
			return 1
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return &pods[0], nil
}

// NoAgentError says no agent pod runs on the node: a misspelt node, a node
// the DaemonSet does not schedule on, or vpcnet installed elsewhere.
type NoAgentError struct {
	Node, Namespace string
}

func (e *NoAgentError) Error() string {
	return fmt.Sprintf("no vpcnet agent pod on node %q in namespace %s (label %s): check the node name with `kubectl get nodes`, and where the agents run with `kubectl -n %s get pods -l %s -o wide`",
		e.Node, e.Namespace, Selector, e.Namespace, Selector)
}
