package doctor

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// KubeReader reads the Node, aws-auth, aws-node's DaemonSet and how many
// NetworkPolicies there are, with get and list calls only.
type KubeReader struct {
	Client kubernetes.Interface
}

var _ Kube = KubeReader{}

// Kube implements Kube.
func (r KubeReader) Kube(ctx context.Context, q KubeQuery) (KubeFacts, error) {
	var k KubeFacts
	for _, name := range q.Names {
		n, err := r.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return k, fmt.Errorf("kubernetes: get Node %s: %w", name, err)
		}
		k.Node, k.FoundBy = nodeFact(n), "name "+name
		break
	}
	if k.Node == nil && q.InstanceID != "" {
		list, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return k, fmt.Errorf("kubernetes: list Nodes: %w", err)
		}
		for i := range list.Items {
			if strings.HasSuffix(list.Items[i].Spec.ProviderID, "/"+q.InstanceID) {
				k.Node, k.FoundBy = nodeFact(&list.Items[i]), "providerID"
				break
			}
		}
	}
	cm, err := r.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		k.AWSAuthErr = err.Error()
	default:
		var roles []struct {
			RoleARN string `json:"rolearn"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["mapRoles"]), &roles); err != nil {
			k.AWSAuthErr = "mapRoles does not parse: " + err.Error()
		} else {
			k.AWSAuth = &AWSAuth{}
			for _, r := range roles {
				k.AWSAuth.RoleARNs = append(k.AWSAuth.RoleARNs, r.RoleARN)
			}
		}
	}
	_, err = r.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "aws-node", metav1.GetOptions{})
	switch {
	case err == nil:
		k.AWSNodeDaemonSet = true
	case !apierrors.IsNotFound(err):
		k.Problems = append(k.Problems, "get DaemonSet kube-system/aws-node: "+err.Error())
	}
	if n, err := r.countNetworkPolicies(ctx); err != nil {
		k.Problems = append(k.Problems, err.Error())
	} else {
		k.NetworkPolicies = &n
	}
	return k, nil
}

// countNetworkPolicies counts the cluster's NetworkPolicy objects a page
// at a time: doctor needs how many there are, not what they say.
func (r KubeReader) countNetworkPolicies(ctx context.Context) (int, error) {
	n, cont := 0, ""
	for {
		l, err := r.Client.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return 0, fmt.Errorf("list NetworkPolicies: %w", err)
		}
		n += len(l.Items)
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}

func nodeFact(n *corev1.Node) *NodeFact {
	f := &NodeFact{Name: n.Name, ProviderID: n.Spec.ProviderID, Hostname: n.Labels[corev1.LabelHostname]}
	for _, t := range n.Spec.Taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		f.Taints = append(f.Taints, s+":"+string(t.Effect))
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalDNS {
			f.InternalDNS = append(f.InternalDNS, a.Address)
		}
	}
	return f
}
