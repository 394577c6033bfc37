package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/agent"
)

// How the Node was found, as KubeState.NodeFoundBy says it.
const (
	ByNodeName   = "MY_NODE_NAME"
	ByProviderID = "providerID"
)

// providerID is the AWS cloud provider's ID for the instance.
func providerID(inst agent.Instance) string {
	return fmt.Sprintf("aws:///%s/%s", inst.AvailabilityZone, inst.ID)
}

// isInstance says a Node's providerID names inst. The zone part is not
// compared: some installers write aws:///<region>/<id> or leave the zone
// out, and the instance ID alone is unique.
func isInstance(pid string, inst agent.Instance) bool {
	rest, ok := strings.CutPrefix(pid, "aws://")
	if !ok || inst.ID == "" {
		return false
	}
	return rest[strings.LastIndexByte(rest, '/')+1:] == inst.ID
}

// resolveNode finds this instance's Node, retrying with backoff until it
// is found or ctx ends. The result is kept: the watch on it follows it
// from then on.
func (c *Client) resolveNode(ctx context.Context, inst agent.Instance) (*corev1.Node, error) {
	backoff := min(time.Second, c.o.RetryInterval)
	for {
		node, by, err := c.findNode(ctx, inst)
		if err == nil {
			c.mu.Lock()
			c.node, c.foundBy, c.nodeProblem = node, by, ""
			c.mismatch = c.mismatchLocked()
			mismatch := c.mismatch
			c.mu.Unlock()
			close(c.nodeFound)
			c.log.Info("Node found", "node", node.Name, "by", by, "providerID", node.Spec.ProviderID)
			if mismatch != "" {
				c.log.Warn("this node's names disagree", "node", node.Name, "mismatch", mismatch)
			}
			c.notify()
			return node, nil
		}
		c.mu.Lock()
		c.nodeProblem = explain(err)
		c.mu.Unlock()
		c.log.Warn("Node not found yet; Events on the Node, custom networking and the startup taint wait for it", "err", err, "retryIn", backoff.String())
		c.notify()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.o.RetryInterval)
	}
}

// findNode looks for the Node named by MY_NODE_NAME, then for the one
// whose providerID names this instance. A named Node whose providerID
// names another instance is used only when no Node names this one.
func (c *Client) findNode(ctx context.Context, inst agent.Instance) (*corev1.Node, string, error) {
	var named *corev1.Node
	var why string
	if name := c.o.NodeName; name != "" {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			c.noteAPI("get Node "+name, nil)
			if n.Spec.ProviderID == "" || isInstance(n.Spec.ProviderID, inst) {
				return n, ByNodeName, nil
			}
			named = n
		case apierrors.IsNotFound(err):
			c.noteAPI("get Node "+name, nil)
			why = fmt.Sprintf("no Node is named %s (MY_NODE_NAME)", name)
		default:
			c.noteAPI("get Node "+name, err)
			return nil, "", fmt.Errorf("get Node %s (MY_NODE_NAME): %w", name, err)
		}
	}
	n, err := c.findByProviderID(ctx, inst)
	switch {
	case err != nil:
		return nil, "", err
	case n != nil:
		return n, ByProviderID, nil
	case named != nil:
		return named, ByNodeName, nil
	}
	msg := fmt.Sprintf("no Node has providerID %s", providerID(inst))
	if why != "" {
		msg = why + " and " + msg
	}
	return nil, "", fmt.Errorf("%s: the kubelet may not have registered the node yet; if it has, set MY_NODE_NAME from the downward API (spec.nodeName)", msg)
}

// findByProviderID lists Nodes a page at a time, keeping none, and stops
// at the first whose providerID names inst. A field selector cannot
// match spec.providerID, so this is the cheapest way; it runs once.
func (c *Client) findByProviderID(ctx context.Context, inst agent.Instance) (*corev1.Node, error) {
	opts := metav1.ListOptions{Limit: c.o.ListPageSize}
	restarted := false
	for {
		list, err := c.cs.CoreV1().Nodes().List(ctx, opts)
		if apierrors.IsResourceExpired(err) && !restarted {
			// The continue token outlived etcd's compaction: start over once.
			opts.Continue, restarted = "", true
			continue
		}
		c.noteAPI("list Nodes", err)
		if err != nil {
			return nil, fmt.Errorf("list Nodes to find providerID %s: %w", providerID(inst), err)
		}
		for i := range list.Items {
			if isInstance(list.Items[i].Spec.ProviderID, inst) {
				n := list.Items[i]
				return &n, nil
			}
		}
		if list.Continue == "" {
			return nil, nil
		}
		opts.Continue = list.Continue
	}
}

// mismatchLocked says which of this node's names disagree, or "". The
// agent follows the Node it found either way; this is for doctor.
func (c *Client) mismatchLocked() string {
	n := c.node
	if n == nil {
		return ""
	}
	var parts []string
	if c.foundBy == ByProviderID && c.o.NodeName != "" {
		parts = append(parts, fmt.Sprintf("MY_NODE_NAME is %s, but this instance's Node (by providerID) is %s: set MY_NODE_NAME from the downward API (spec.nodeName)", c.o.NodeName, n.Name))
	}
	if pid := n.Spec.ProviderID; pid != "" && !isInstance(pid, c.inst) {
		parts = append(parts, fmt.Sprintf("Node %s has providerID %s, but this is instance %s (%s): MY_NODE_NAME names another machine's Node", n.Name, pid, c.inst.ID, providerID(c.inst)))
	}
	if h := c.o.Hostname; h != "" && !sameHost(h, n.Name) {
		parts = append(parts, fmt.Sprintf("the host name is %s but the Node is named %s", h, n.Name))
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalDNS && a.Address != "" && !sameHost(a.Address, n.Name) && !hasInternalDNS(n, n.Name) {
			parts = append(parts, fmt.Sprintf("EC2's private DNS name is %s but the Node is named %s", a.Address, n.Name))
			break
		}
	}
	return strings.Join(parts, "; ")
}

// sameHost compares host names as DNS does, also when one of them is the
// first label of the other (a short host name).
func sameHost(a, b string) bool {
	a, b = strings.ToLower(strings.TrimSuffix(a, ".")), strings.ToLower(strings.TrimSuffix(b, "."))
	if a == b {
		return true
	}
	first := func(s string) string { h, _, _ := strings.Cut(s, "."); return h }
	return (!strings.Contains(a, ".") && a == first(b)) || (!strings.Contains(b, ".") && b == first(a))
}

func hasInternalDNS(n *corev1.Node, name string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalDNS && sameHost(a.Address, name) {
			return true
		}
	}
	return false
}
