package simcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

// ENI is one entry of an agent's /v1/enis, the fields tools here use.
type ENI struct {
	ID          string `json:"id"`
	DeviceIndex int    `json:"deviceIndex"`
	Primary     bool   `json:"primary"`
	Total       int    `json:"total"`
	Assigned    int    `json:"assigned"`
	Cooling     int    `json:"cooling"`
	Free        int    `json:"free"`
}

// Holder is one entry of an agent's /v1/pods.
type Holder struct {
	Address     netip.Addr `json:"address"`
	Pod         string     `json:"pod"`
	ContainerID string     `json:"containerId"`
}

// ENIs is the agent's view of its pool.
func (n *Node) ENIs(ctx context.Context) ([]ENI, error) {
	var out []ENI
	return out, n.getJSON(ctx, "/v1/enis", &out)
}

// Holders lists who the agent says holds which address.
func (n *Node) Holders(ctx context.Context) ([]Holder, error) {
	var out []Holder
	return out, n.getJSON(ctx, "/v1/pods", &out)
}

func (n *Node) getJSON(ctx context.Context, path string, v any) error {
	body, err := n.Get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("node %s: decode %s: %w", n.ID, path, err)
	}
	return nil
}

// GC runs CNI GC with the pods the runtime still has, as containerd does
// periodically: the agent releases every other address it holds.
func (n *Node) GC(ctx context.Context, valid []*Pod) error {
	cni, list, err := n.cni()
	if err != nil {
		return err
	}
	args := &libcni.GCArgs{}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.ContainerID, IfName: "eth0"})
	}
	return n.inNode(func() error { return cni.GCNetworkList(ctx, list, args) })
}

// ENIOf says which ENI EC2 has the address on, and its device index; ok is
// false if no ENI attached to the node carries it. Only a cluster started
// in this process can ask the emulator.
func (c *Cluster) ENIOf(node string, addr netip.Addr) (id string, deviceIndex int, ok bool) {
	if c.Cloud == nil {
		return "", 0, false
	}
	ifs, err := c.Cloud.Interfaces(node)
	if err != nil {
		return "", 0, false
	}
	for _, e := range ifs {
		for _, a := range e.Addresses {
			if a == addr {
				return e.ID, e.DeviceIndex, true
			}
		}
		for _, p := range e.Prefixes {
			if p.Contains(addr) {
				return e.ID, e.DeviceIndex, true
			}
		}
	}
	return "", 0, false
}

// Planned is what the agent's planner would change now (from /v1/status):
// empty once the pool is at the target its settings ask for.
func (n *Node) Planned(ctx context.Context) ([]string, error) {
	var st struct {
		Planned []string `json:"planned"`
	}
	return st.Planned, n.getJSON(ctx, "/v1/status", &st)
}

// WaitSettled waits until every agent's pool is at its target.
func (c *Cluster) WaitSettled(ctx context.Context) error {
	for _, n := range c.Nodes {
		for {
			planned, err := n.Planned(ctx)
			if err != nil {
				return err
			}
			if len(planned) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s: pool not at target: still planned %v: %w", n.ID, planned, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// AgentStatus is the part of an agent's /v1/status that says whether it
// can serve and, if not, why.
type AgentStatus struct {
	Ready      bool `json:"ready"`
	Conditions []struct {
		Name    string `json:"name"`
		OK      bool   `json:"ok"`
		Message string `json:"message"`
	} `json:"conditions"`
	LastEC2Error string `json:"lastEc2Error"`
}

// Status asks the agent for its /v1/status. An error means the agent did
// not answer: it is not running, or not serving yet.
func (n *Node) Status(ctx context.Context) (AgentStatus, error) {
	var st AgentStatus
	// The status is the answer whatever the agent's readiness, so any
	// HTTP status with a JSON body counts.
	body, _, err := n.get(ctx, "/v1/status")
	if err != nil {
		return st, fmt.Errorf("node %s: no answer on %s: %w", n.ID, introspection, err)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("node %s: decode /v1/status: %w", n.ID, err)
	}
	return st, nil
}
