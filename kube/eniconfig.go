package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/vpcnet/vpcnet/agent"
)

// ENIConfigResource is the Amazon VPC CNI's custom networking resource:
// cluster-scoped, kind ENIConfig, with spec.subnet and
// spec.securityGroups.
var ENIConfigResource = schema.GroupVersionResource{Group: "crd.k8s.amazonaws.com", Version: "v1alpha1", Resource: "eniconfigs"}

// DefaultENIConfig is the ENIConfig a Node with neither the annotation nor
// the label uses, as in the Amazon VPC CNI.
const DefaultENIConfig = "default"

// ExternalENIConfigLabel names the node's ENIConfig from outside the
// cluster (the kubelet's --node-labels, a node bootstrap script): in the
// Amazon VPC CNI it is the source of truth, above the annotation and
// label its settings name (pkg/eniconfig, GetNodeSpecificENIConfigName).
const ExternalENIConfigLabel = "vpc.amazonaws.com/externalEniConfig"

// eniConfigName is the ENIConfig a Node asks for and where the name came
// from: the external label beats the annotation, which beats the label.
// An empty value counts as absent, for all three: no ENIConfig has an
// empty name (aws-node would look one up and find none).
func eniConfigName(n *corev1.Node, annotation, label string) (name, from string) {
	if v := n.Labels[ExternalENIConfigLabel]; v != "" {
		return v, "label " + ExternalENIConfigLabel
	}
	if v := n.Annotations[annotation]; v != "" {
		return v, "annotation " + annotation
	}
	if v := n.Labels[label]; v != "" {
		return v, "label " + label
	}
	return DefaultENIConfig, fmt.Sprintf("the default: the Node has neither annotation %s nor label %s", annotation, label)
}

// eniWatch is the informer on the one ENIConfig the Node names. Guarded
// by Client.mu.
type eniWatch struct {
	name, from string
	cancel     context.CancelFunc
	store      cache.Store
	synced     bool
	// listErr is why the ENIConfig could not be read, until it is.
	listErr string
}

// followENIConfig makes sure the ENIConfig named name is the one
// watched. A new name stops the old informer and starts one filtered to
// the new name.
func (c *Client) followENIConfig(name, from string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.eniWatcher; w != nil && w.name == name {
		w.from = from
		return
	}
	if w := c.eniWatcher; w != nil {
		w.cancel()
		c.log.Info("the Node names another ENIConfig now", "was", w.name, "now", name, "from", from)
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	res := c.dyn.Resource(ENIConfigResource)
	inf := informer(c.dyn, &unstructured.Unstructured{}, fields.OneTermEqualSelector("metadata.name", name).String(),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) })
	w := &eniWatch{name: name, from: from, cancel: cancel, store: inf.GetStore()}
	c.eniWatcher = w
	c.watchErrors(inf, eniWatchWhat(name), func(err error) {
		c.mu.Lock()
		w.listErr = describeENIConfigErr(err)
		c.mu.Unlock()
	})
	notify := func(any) { c.notify() }
	mustHandle(inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { c.notify() }, DeleteFunc: notify,
	}))
	c.wg.Add(2)
	go func() { defer c.wg.Done(); inf.RunWithContext(ctx) }()
	go func() {
		defer c.wg.Done()
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			c.mu.Lock()
			w.synced, w.listErr = true, ""
			c.mu.Unlock()
			c.notify()
		}
	}()
}

// eniWatchWhat names the ENIConfig's watch among the layer's failures.
func eniWatchWhat(name string) string { return "watch ENIConfig " + name }

// describeENIConfigErr turns a list failure into what to do about it.
func describeENIConfigErr(err error) string {
	if apierrors.IsNotFound(err) {
		return "the ENIConfig CRD (eniconfigs.crd.k8s.amazonaws.com, v1alpha1) is not installed: apply it from deploy/"
	}
	return explain(err)
}

// eniStateLocked is the ENIConfig as the agent needs it.
func (c *Client) eniStateLocked() agent.ENIConfigState {
	w := c.eniWatcher
	if w == nil {
		msg := "waiting for this node's Node to learn which ENIConfig it names"
		if c.nodeProblem != "" {
			msg += ": " + c.nodeProblem
		}
		return agent.ENIConfigState{Problem: msg}
	}
	st := agent.ENIConfigState{Name: w.name, From: w.from}
	if !w.synced {
		st.Problem = fmt.Sprintf("waiting to read ENIConfig %s (named by %s) from the API server", w.name, w.from)
		if w.listErr != "" {
			st.Problem += ": " + w.listErr
		}
		return st
	}
	st.Known = true
	obj, ok, _ := w.store.GetByKey(w.name)
	if !ok {
		st.Problem = fmt.Sprintf("ENIConfig %s (named by %s) does not exist: create it (apiVersion crd.k8s.amazonaws.com/v1alpha1, kind ENIConfig, spec.subnet in this node's zone) or change what names it", w.name, w.from)
		return st
	}
	u, _ := obj.(*unstructured.Unstructured)
	subnet, groups, err := parseENIConfig(u)
	if err != nil {
		st.Problem = fmt.Sprintf("ENIConfig %s (named by %s): %v", w.name, w.from, err)
		return st
	}
	st.Found, st.Subnet, st.SecurityGroups = true, subnet, groups
	// Read once, yet a failing watch means an edit to it would go unseen:
	// the status says so (it still holds what was read, so the node keeps
	// working), for as long as the failure is reported anywhere.
	if e, failing := c.errs[eniWatchWhat(w.name)]; failing && c.now().Sub(e.at) <= errorTTL {
		st.Problem = fmt.Sprintf("ENIConfig %s (named by %s) as last read; changes to it are not followed: %s", w.name, w.from, e.msg)
	}
	return st
}

// maxENISecurityGroups is the most security groups EC2 attaches to one
// ENI (5 by default, 16 with a quota increase).
const maxENISecurityGroups = 16

// EC2's IDs are the prefix and up to 17 hex digits; the local cloud and
// tests use other letters, so any letters and digits, bounded, are
// accepted. What matters is refusing what EC2 never gives: spaces,
// newlines and other bytes that reach EC2 filters, logs and Events. A loop,
// not the regexp ^subnet-[0-9A-Za-z]{1,64}$: its bounded repeat compiles to
// 750 allocations (50 KB) at start-up, held for the agent's life.
func isEC2ID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func isSubnetID(s string) bool { return isEC2ID(s, "subnet-") }
func isGroupID(s string) bool  { return isEC2ID(s, "sg-") }

// parseENIConfig reads spec.subnet (required) and spec.securityGroups
// (optional: empty means the primary ENI's, as in the Amazon VPC CNI).
func parseENIConfig(u *unstructured.Unstructured) (subnet string, groups []string, err error) {
	if u == nil {
		return "", nil, errors.New("not an ENIConfig object")
	}
	subnet, found, err := unstructured.NestedString(u.Object, "spec", "subnet")
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("spec.subnet: %w", err)
	case !found || subnet == "":
		return "", nil, errors.New("spec.subnet is empty: set it to the subnet pods on this node get addresses from (subnet-...)")
	case !isSubnetID(subnet):
		return "", nil, fmt.Errorf("spec.subnet %s is not a subnet ID (subnet- and up to 64 letters or digits)", quoteShort(subnet))
	}
	groups, _, err = unstructured.NestedStringSlice(u.Object, "spec", "securityGroups")
	if err != nil {
		return "", nil, fmt.Errorf("spec.securityGroups: %w", err)
	}
	if len(groups) > maxENISecurityGroups {
		return "", nil, fmt.Errorf("spec.securityGroups lists %d groups; an ENI takes at most %d", len(groups), maxENISecurityGroups)
	}
	seen := make(map[string]bool, len(groups))
	for i, g := range groups {
		if !isGroupID(g) {
			return "", nil, fmt.Errorf("spec.securityGroups[%d]: %s is not a security group ID (sg- and up to 64 letters or digits)", i, quoteShort(g))
		}
		if seen[g] {
			return "", nil, fmt.Errorf("spec.securityGroups[%d]: %q is listed twice", i, g)
		}
		seen[g] = true
	}
	return subnet, groups, nil
}

// quoteShort quotes s for an error, at most 64 bytes of it: an object's
// field can be a megabyte, and the error goes to logs and Events.
func quoteShort(s string) string {
	const maxQuoted = 64
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:maxQuoted], len(s))
}
