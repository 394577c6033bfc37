package kube

import corev1 "k8s.io/api/core/v1"

// cordoned says the Node carries node.kubernetes.io/unschedulable with
// effect NoSchedule, the taint the node lifecycle controller adds when
// the Node is cordoned (spec.unschedulable). The taint, not the field, is
// what the Amazon VPC CNI tests (ipamd's isNodeNonSchedulable matches key
// and effect), so the two agents hold a cordoned node's ENIs at the same
// moment.
func cordoned(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnschedulable && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}
