package simcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vpcnet/vpcnet/fabric"
)

// Pod is one sandbox: a namespace wired by the CNI plugin.
type Pod struct {
	Name        string     `json:"name"`
	Namespace   string     `json:"namespace"`
	Node        string     `json:"node"`
	NetNS       string     `json:"netns"`
	ContainerID string     `json:"containerId"`
	Addr        netip.Addr `json:"addr"`
	// Chain and Capabilities are what the pod was added with (see
	// PodOptions); DEL and CHECK pass them again, as the runtime does.
	Chain        []map[string]any `json:"chain,omitempty"`
	Capabilities map[string]any   `json:"capabilities,omitempty"`
}

// PodOptions shape one pod's CNI invocation.
type PodOptions struct {
	// Chain adds plugins after the agent's configuration list, as an
	// operator's own conflist would (bandwidth, a second portmap, ...).
	Chain []map[string]any
	// Capabilities are the runtime's capability arguments, such as
	// portMappings for hostPort and bandwidth for traffic shaping.
	Capabilities map[string]any
}

var podName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)

// runtimeConf is what containerd passes for the pod.
func (p *Pod) runtimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.ContainerID, NetNS: p.NetNS, IfName: "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name}, {"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID},
		},
		CapabilityArgs: p.Capabilities,
	}
}

// cni is the runtime's view of the node: the agent's conflist, with chain
// appended, and the plugin directory.
func (n *Node) cni(chain ...map[string]any) (*libcni.CNIConfig, *libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(n.confDir(), []string{".conflist"})
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: read CNI configuration: %w", n.ID, err)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("node %s: no CNI configuration in %s yet: the agent writes it once ready (see %s)", n.ID, n.confDir(), n.AgentLog())
	}
	data, err := os.ReadFile(files[0])
	if err == nil && len(chain) > 0 {
		data, err = appendPlugins(data, chain)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: %s: %w", n.ID, files[0], err)
	}
	return libcni.NewCNIConfigWithCacheDir([]string{n.cluster.state.BinDir}, n.cniCacheDir(), nil), list, nil
}

func appendPlugins(conflist []byte, chain []map[string]any) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(conflist, &doc); err != nil {
		return nil, err
	}
	plugins, _ := doc["plugins"].([]any)
	for _, p := range chain {
		plugins = append(plugins, p)
	}
	doc["plugins"] = plugins
	return json.Marshal(doc)
}

// inNode runs f on a thread in the node's namespace, so the plugin the
// runtime execs starts there, as it would on the node.
func (n *Node) inNode(f func() error) error {
	var ferr error
	if err := fabric.Do(n.NetNS, func() error { ferr = f(); return nil }); err != nil {
		return err
	}
	return ferr
}

// AddPod creates a pod's namespace and runs CNI ADD for it; the pod then
// answers probes (see Probe). A failed ADD leaves no namespace behind.
func (n *Node) AddPod(ctx context.Context, name string) (*Pod, error) {
	return n.AddPodWith(ctx, name, PodOptions{})
}

// AddPodWith is AddPod with a chain of further plugins and capability
// arguments.
func (n *Node) AddPodWith(ctx context.Context, name string, opts PodOptions) (*Pod, error) {
	if !podName.MatchString(name) {
		return nil, fmt.Errorf("pod name %q: use lower-case letters, digits and '-', at most 42 characters", name)
	}
	p := &Pod{Name: name, Namespace: "default", Node: n.ID, ContainerID: "sim-" + name, Chain: opts.Chain, Capabilities: opts.Capabilities}
	if _, err := os.Stat(n.cluster.podFile(name)); err == nil {
		return nil, fmt.Errorf("pod %s already exists", name)
	}
	nsName := n.cluster.state.Prefix + "pod-" + name
	path, err := fabric.CreateNS(nsName)
	if err != nil {
		return nil, err
	}
	if err := recordNamespace(n.cluster.state.StateDir, nsName); err != nil {
		return nil, errors.Join(fmt.Errorf("add pod %s: record its namespace: %w", name, err), fabric.DeleteNS(nsName))
	}
	p.NetNS = path
	cni, list, err := n.cni(p.Chain...)
	if err == nil {
		var res types.Result
		err = n.inNode(func() error {
			var err error
			res, err = cni.AddNetworkList(ctx, list, p.runtimeConf())
			return err
		})
		if err == nil {
			p.Addr, err = resultAddr(res)
		}
	}
	if err != nil {
		// containerd tears a failed sandbox down with DEL before it
		// removes the namespace; so does this.
		// The cleanup runs even when the ADD was cancelled.
		if cni != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			_ = n.inNode(func() error { return cni.DelNetworkList(dctx, list, p.runtimeConf()) })
			cancel()
		}
		_ = fabric.DeleteNS(nsName)
		return nil, fmt.Errorf("add pod %s on %s: %w", name, n.ID, err)
	}
	if err := n.cluster.savePod(p); err != nil {
		return p, err
	}
	return p, nil
}

// DelPod runs CNI DEL for the pod and removes its namespace, in the order
// the kubelet uses when a pod is deleted.
func (n *Node) DelPod(ctx context.Context, p *Pod) error {
	cni, list, err := n.cni(p.Chain...)
	if err != nil {
		return err
	}
	if err := n.inNode(func() error { return cni.DelNetworkList(ctx, list, p.runtimeConf()) }); err != nil {
		return fmt.Errorf("delete pod %s on %s: %w", p.Name, n.ID, err)
	}
	if err := fabric.DeleteNS(filepath.Base(p.NetNS)); err != nil {
		return err
	}
	return n.cluster.forgetPod(p.Name)
}

// CheckPod runs CNI CHECK for the pod.
func (n *Node) CheckPod(ctx context.Context, p *Pod) error {
	cni, list, err := n.cni(p.Chain...)
	if err != nil {
		return err
	}
	return n.inNode(func() error { return cni.CheckNetworkList(ctx, list, p.runtimeConf()) })
}

func resultAddr(res types.Result) (netip.Addr, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(r.IPs) == 0 {
		return netip.Addr{}, errors.New("CNI result has no address")
	}
	// The first address is the pod's own: its IPv4 address, or on an
	// IPv6 node its IPv6 one (the IPv4 egress plugin adds none).
	a, ok := netip.AddrFromSlice(r.IPs[0].Address.IP)
	if !ok {
		return netip.Addr{}, fmt.Errorf("CNI result address %q is not an IP address", r.IPs[0].Address.IP)
	}
	return a.Unmap(), nil
}

// Pods lists the pods of the cluster, from the state directory, so that
// another process's pods are listed too.
func (c *Cluster) Pods() ([]*Pod, error) {
	ents, err := os.ReadDir(c.podDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pods []*Pod
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		p, err := c.Pod(name)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// Pod reads one pod's record.
func (c *Cluster) Pod(name string) (*Pod, error) {
	data, err := os.ReadFile(c.podFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no pod %s in the local cloud", name)
	}
	if err != nil {
		return nil, err
	}
	var p Pod
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("pod record %s: %w", c.podFile(name), err)
	}
	return &p, nil
}

func (c *Cluster) podDir() string             { return filepath.Join(c.state.StateDir, "pods") }
func (c *Cluster) podFile(name string) string { return filepath.Join(c.podDir(), name+".json") }

func (c *Cluster) savePod(p *Pod) error {
	if err := os.MkdirAll(c.podDir(), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(c.podFile(p.Name), data, 0o600)
}

func (c *Cluster) forgetPod(name string) error {
	if err := os.Remove(c.podFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
