package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vpcnet/vpcnet/config"
)

// The pre-switch check (issue 24): before an operator replaces aws-node's
// DaemonSet with vpcnet's, what would change. It reads the cluster only.

// awsNodeContainer is aws-node's agent container in its DaemonSet.
const awsNodeContainer = "aws-node"

// preswitchReport is what the check found.
type preswitchReport struct {
	DaemonSet string `json:"daemonSet"` // namespace/name, "" when there is none
	Image     string `json:"image,omitempty"`
	Nodes     int    `json:"nodes"` // nodes running an aws-node pod
	// Settings are aws-node's container's literal env, NAME=value: the
	// lines to put in vpcnet's container. Credentials are checked but
	// not shown (secretShown).
	Settings []string `json:"settings"`
	// Refused are the settings vpcnetd would stop at, each with what to
	// do instead, from vpcnetd's own settings parser.
	Refused []string `json:"refused,omitempty"`
	// Unchecked are env entries set from elsewhere (valueFrom): vpcnetd
	// reads the same names, but their values are only known on the node.
	Unchecked []string `json:"unchecked,omitempty"`
	// HostPortPods are pods with a hostPort on aws-node's nodes: their
	// portmap rules stay as aws-node left them (drain those nodes first).
	HostPortPods []string `json:"hostPortPods,omitempty"`
	// Notes are differences worth reading that stop nothing.
	Notes []string `json:"notes,omitempty"`
}

// Ready says whether the switch can go ahead as the README describes.
func (r preswitchReport) Ready() bool { return r.DaemonSet != "" && len(r.Refused) == 0 }

// preswitch reads aws-node's DaemonSet in namespace and the cluster's pods.
func preswitch(ctx context.Context, cs kubernetes.Interface, namespace string) (preswitchReport, error) {
	var r preswitchReport
	ds, err := cs.AppsV1().DaemonSets(namespace).Get(ctx, "aws-node", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read DaemonSet %s/aws-node: %w", namespace, err)
	}
	r.DaemonSet = namespace + "/aws-node"
	var ctr *corev1.Container
	for i := range ds.Spec.Template.Spec.Containers {
		if ds.Spec.Template.Spec.Containers[i].Name == awsNodeContainer {
			ctr = &ds.Spec.Template.Spec.Containers[i]
		}
	}
	if ctr == nil {
		return r, fmt.Errorf("DaemonSet %s has no container %q: is it aws-node's?", r.DaemonSet, awsNodeContainer)
	}
	r.Image = ctr.Image
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			r.Unchecked = append(r.Unchecked, e.Name)
			continue
		}
		r.Settings = append(r.Settings, e.Name+"="+e.Value)
	}
	_, err = config.LoadEnviron(r.Settings)
	if err != nil {
		var cerr *config.Error
		if !errors.As(err, &cerr) {
			return r, err
		}
		for _, p := range cerr.Problems {
			if isSecret(p.Name) {
				p.Value = secretShown
			}
			r.Refused = append(r.Refused, p.String())
		}
	}
	for i, kv := range r.Settings {
		if name, _, _ := strings.Cut(kv, "="); isSecret(name) {
			r.Settings[i] = name + "=" + secretShown
		}
	}
	if !slices.ContainsFunc(r.Settings, func(kv string) bool { return strings.HasPrefix(kv, "ENI_CONFIG_LABEL_DEF=") }) &&
		slices.Contains(r.Settings, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true") {
		r.Notes = append(r.Notes, "custom networking without ENI_CONFIG_LABEL_DEF: aws-node reads the label k8s.amazonaws.com/eniConfig, vpcnet topology.kubernetes.io/zone; set ENI_CONFIG_LABEL_DEF=k8s.amazonaws.com/eniConfig in vpcnet's container if your nodes use aws-node's label")
	}

	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, fmt.Errorf("list pods: %w", err)
	}
	awsNodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.Namespace == namespace && p.Labels["k8s-app"] == "aws-node" && p.Spec.NodeName != "" {
			awsNodes[p.Spec.NodeName] = true
		}
	}
	r.Nodes = len(awsNodes)
	for _, p := range pods.Items {
		if !awsNodes[p.Spec.NodeName] || p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			if slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.HostPort != 0 }) {
				r.HostPortPods = append(r.HostPortPods, fmt.Sprintf("%s/%s on %s", p.Namespace, p.Name, p.Spec.NodeName))
				break
			}
		}
	}
	slices.Sort(r.HostPortPods)
	return r, nil
}

// secretShown stands for a credential's value in what the check prints:
// a terminal or a ticket is no place for it.
const secretShown = "(set; not shown)"

// isSecret says whether an env name holds a credential.
func isSecret(name string) bool {
	return slices.ContainsFunc([]string{"SECRET", "TOKEN", "PASSWORD", "ACCESS_KEY", "CREDENTIAL"}, func(w string) bool { return strings.Contains(name, w) })
}

// print writes the report as a table (the default) or JSON.
func (r preswitchReport) print(w io.Writer, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			preswitchReport
			Ready bool `json:"ready"`
		}{r, r.Ready()})
	}
	if r.DaemonSet == "" {
		fmt.Fprintln(w, "no DaemonSet aws-node: nothing to switch from (install vpcnet from deploy/vpcnet.yaml)")
		return nil
	}
	fmt.Fprintf(w, "aws-node: DaemonSet %s, image %s, on %d nodes\n\n", r.DaemonSet, r.Image, r.Nodes)
	fmt.Fprintf(w, "settings to give vpcnet's container (env of %s), %d:\n", awsNodeContainer, len(r.Settings))
	for _, s := range r.Settings {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if len(r.Unchecked) > 0 {
		fmt.Fprintf(w, "set from the node or a Secret (valueFrom), read by vpcnetd by the same names, values not checked here: %s\n", strings.Join(r.Unchecked, ", "))
	}
	fmt.Fprintln(w)
	if len(r.Refused) == 0 {
		fmt.Fprintln(w, "vpcnetd starts with these settings: each means what it means to aws-node, or is accepted at aws-node's default")
	} else {
		fmt.Fprintf(w, "vpcnetd would refuse to start with %d of them (change them in vpcnet's container, not in aws-node's):\n", len(r.Refused))
		for _, p := range r.Refused {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if len(r.HostPortPods) > 0 {
		fmt.Fprintf(w, "\npods with a hostPort on aws-node's nodes keep portmap's rules until they are deleted; drain their nodes before switching them:\n")
		for _, p := range r.HostPortPods {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	fmt.Fprintln(w)
	if r.Ready() {
		fmt.Fprintln(w, "ready to switch: delete aws-node's DaemonSet, then apply deploy/vpcnet.yaml with the settings above (README: Switching from the Amazon VPC CNI)")
	} else {
		fmt.Fprintln(w, "not ready to switch: fix the settings vpcnetd would refuse first")
	}
	return nil
}
