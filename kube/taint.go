package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// taintLoop removes the startup taint whenever the agent is ready and the
// Node carries it: once after start, and again if the Node is registered
// anew. It never adds the taint: an agent that turns unready later has
// pods on the node already, and the CNI STATUS verb tells kubelet.
func (c *Client) taintLoop(ctx context.Context) {
	if c.o.StartupTaint == "" {
		return
	}
	backoff := min(time.Second, c.o.RetryInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wakeTaint:
		}
		for {
			err := c.removeTaint(ctx)
			c.mu.Lock()
			c.taintErr = ""
			if err != nil {
				c.taintErr = explain(err)
			}
			c.mu.Unlock()
			if err == nil {
				backoff = min(time.Second, c.o.RetryInterval)
				break
			}
			c.log.Warn("startup taint not removed yet; retrying", "taint", c.o.StartupTaint, "err", err, "retryIn", backoff.String())
			c.notify()
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, c.o.RetryInterval)
		}
	}
}

// removeTaint takes every taint with the startup key off the Node, if the
// agent is ready. It reads the Node fresh and patches with a test of the
// taints it read, so a taint someone else adds meanwhile is not lost: the
// patch fails and the next try reads again.
func (c *Client) removeTaint(ctx context.Context) error {
	key := c.o.StartupTaint
	c.mu.Lock()
	ready, cached := c.ready, c.node
	c.mu.Unlock()
	if !ready || cached == nil || !hasTaint(cached.Spec.Taints, key) {
		return nil
	}
	node, err := c.cs.CoreV1().Nodes().Get(ctx, cached.Name, metav1.GetOptions{})
	c.noteAPI("get Node "+cached.Name, err)
	if err != nil {
		return fmt.Errorf("read Node %s before removing taint %s: %w", cached.Name, key, err)
	}
	if !hasTaint(node.Spec.Taints, key) {
		return nil
	}
	patch, err := taintPatch(node.Spec.Taints, key)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("remove taint %s from Node %s", key, node.Name)
	c.mu.Lock()
	c.taintPatching = true
	c.mu.Unlock()
	_, err = c.cs.CoreV1().Nodes().Patch(ctx, node.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "vpcnetd"})
	c.noteAPI(what, err)
	c.mu.Lock()
	c.taintPatching = false
	if err == nil {
		c.taintGone = c.now()
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c.log.Info("startup taint removed: the agent can serve pods", "taint", key, "node", node.Name)
	c.notify()
	return nil
}

func hasTaint(taints []corev1.Taint, key string) bool {
	for _, t := range taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// taintPatch is a JSON patch that replaces the Node's taints with those
// not keyed key, and fails if the taints are no longer those read.
func taintPatch(taints []corev1.Taint, key string) ([]byte, error) {
	keep := []corev1.Taint{}
	for _, t := range taints {
		if t.Key != key {
			keep = append(keep, t)
		}
	}
	type op struct {
		Op    string         `json:"op"`
		Path  string         `json:"path"`
		Value []corev1.Taint `json:"value"`
	}
	b, err := json.Marshal([]op{
		{Op: "test", Path: "/spec/taints", Value: taints},
		{Op: "replace", Path: "/spec/taints", Value: keep},
	})
	if err != nil {
		return nil, fmt.Errorf("taint patch: %w", err)
	}
	return b, nil
}

// taintStateLocked says what became of the startup taint, and whether it
// is off the Node.
func (c *Client) taintStateLocked() (string, bool) {
	key := c.o.StartupTaint
	switch {
	case key == "":
		return "none: VPCNET_STARTUP_TAINT is empty", true
	case c.node == nil:
		return fmt.Sprintf("%s: waiting to find the Node", key), false
	case !hasTaint(c.node.Spec.Taints, key) && c.taintPatching:
		// The watch may deliver the patched Node before the patch's
		// answer: the agent's own removal, not yet recorded.
		return fmt.Sprintf("%s: the agent is ready; removing it from Node %s", key, c.node.Name), false
	case !hasTaint(c.node.Spec.Taints, key) && !c.taintGone.IsZero():
		return fmt.Sprintf("%s: removed from Node %s at %s", key, c.node.Name, c.taintGone.UTC().Format(time.RFC3339)), true
	case !hasTaint(c.node.Spec.Taints, key):
		return fmt.Sprintf("%s: not on Node %s", key, c.node.Name), true
	case !c.ready:
		return fmt.Sprintf("%s: on Node %s until the agent is ready", key, c.node.Name), false
	case c.taintErr != "":
		return fmt.Sprintf("%s: the agent is ready but removing the taint failed (retrying): %s", key, c.taintErr), false
	}
	return fmt.Sprintf("%s: the agent is ready; removing it from Node %s", key, c.node.Name), false
}
