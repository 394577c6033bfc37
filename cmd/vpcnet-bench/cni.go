package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vpcnet/vpcnet/fabric"
)

// pod is one sandbox: a namespace and the identity containerd gives the
// plugins for it.
type pod struct {
	name string
	// namespace is the pod's Kubernetes namespace; empty is "default".
	namespace   string
	nsName      string
	netns       string
	containerID string
}

// newPod creates the pod's namespace, named under prefix so that a sweep
// of the prefix removes it whatever happens.
func newPod(prefix, name string) (*pod, error) {
	p := &pod{name: name, nsName: prefix + "pod-" + name, containerID: "bench-" + name}
	path, err := fabric.CreateNS(p.nsName)
	if err != nil {
		return nil, err
	}
	p.netns = path
	return p, nil
}

func (p *pod) remove() error { return fabric.DeleteNS(p.nsName) }

func (p *pod) runtimeConf() *libcni.RuntimeConf {
	ns := p.namespace
	if ns == "" {
		ns = "default"
	}
	return &libcni.RuntimeConf{
		ContainerID: p.containerID, NetNS: p.netns, IfName: "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", ns},
			{"K8S_POD_NAME", p.name}, {"K8S_POD_INFRA_CONTAINER_ID", p.containerID},
		},
	}
}

// network is one CNI configuration list run the way containerd runs it,
// from a thread inside the node's namespace, so the plugins are born
// there.
type network struct {
	name  string
	node  string // the node's namespace
	cni   *libcni.CNIConfig
	list  *libcni.NetworkConfigList
	timer *timedExec
}

func newNetwork(name, nodeNS string, binDirs []string, cacheDir string, list *libcni.NetworkConfigList) *network {
	t := &timedExec{took: map[execKey]time.Duration{}}
	return &network{
		name: name, node: nodeNS, list: list, timer: t,
		cni: libcni.NewCNIConfigWithCacheDir(binDirs, cacheDir, t),
	}
}

// add runs ADD for the pod and returns how long libcni took, the
// namespace switch excluded.
func (n *network) add(ctx context.Context, p *pod) (time.Duration, error) {
	return n.timed(func() error {
		_, err := n.cni.AddNetworkList(ctx, n.list, p.runtimeConf())
		return err
	})
}

// addAddr is add that also returns the pod's IPv4 address from the
// result, for the scenarios that publish it in the API server as
// kubelet does.
func (n *network) addAddr(ctx context.Context, p *pod) (time.Duration, netip.Addr, error) {
	var res types.Result
	took, err := n.timed(func() error {
		var err error
		res, err = n.cni.AddNetworkList(ctx, n.list, p.runtimeConf())
		return err
	})
	if err != nil {
		return took, netip.Addr{}, err
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return took, netip.Addr{}, fmt.Errorf("ADD result of %s: %w", p.name, err)
	}
	for _, ip := range r.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok && a.Unmap().Is4() {
			return took, a.Unmap(), nil
		}
	}
	return took, netip.Addr{}, fmt.Errorf("ADD result of %s has no IPv4 address: %v", p.name, r.IPs)
}

// del runs DEL for the pod, timed like add.
func (n *network) del(ctx context.Context, p *pod) (time.Duration, error) {
	return n.timed(func() error { return n.cni.DelNetworkList(ctx, n.list, p.runtimeConf()) })
}

func (n *network) timed(f func() error) (time.Duration, error) {
	var took time.Duration
	var ferr error
	err := fabric.Do(n.node, func() error {
		start := time.Now()
		ferr = f()
		took = time.Since(start)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return took, ferr
}

// execKey names one plugin process: which plugin, which verb, which
// container.
type execKey struct{ plugin, command, container string }

// timedExec is libcni's plugin executor with a stopwatch: how long each
// plugin process ran, from fork to exit.
type timedExec struct {
	invoke.RawExec
	version.PluginDecoder
	// mu guards took.
	mu   sync.Mutex
	took map[execKey]time.Duration
}

func (e *timedExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	start := time.Now()
	out, err := e.RawExec.ExecPlugin(ctx, path, stdin, environ)
	took := time.Since(start)
	k := execKey{plugin: filepath.Base(path)}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			k.command = v
		} else if v, ok := strings.CutPrefix(kv, "CNI_CONTAINERID="); ok {
			k.container = v
		}
	}
	e.mu.Lock()
	e.took[k] = took
	e.mu.Unlock()
	return out, err
}

// take returns and forgets how long the plugin ran for the container.
func (e *timedExec) take(plugin, command, container string) (time.Duration, bool) {
	k := execKey{plugin, command, container}
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.took[k]
	delete(e.took, k)
	return d, ok
}

// agentConfList reads the conflist the agent wrote into confDir. With
// only set, it keeps only plugins of those types (an older agent, as a
// baseline, chains portmap after vpcnet); with logFile set, vpcnet logs
// there.
func agentConfList(confDir string, logFile string, only ...string) (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(confDir, []string{".conflist"})
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CNI configuration in %s (the agent writes it once ready): %v", confDir, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	data, err = editConfList(data, logFile, only)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", files[0], err)
	}
	return libcni.ConfListFromBytes(data)
}

// editConfList keeps only the plugins whose type is in only (all when
// only is empty) and points vpcnet's log at logFile.
func editConfList(data []byte, logFile string, only []string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	plugins, _ := doc["plugins"].([]any)
	var kept []any
	for _, p := range plugins {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		if len(only) > 0 && !slices.Contains(only, typ) {
			continue
		}
		if typ == "vpcnet" && logFile != "" {
			m["pluginLogFile"] = logFile
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("no plugin of type %v in the configuration list", only)
	}
	doc["plugins"] = kept
	return json.Marshal(doc)
}

// refConfList is the reference: Debian's ptp with host-local, the
// simplest point-to-point plugins, keeping their state in dataDir, giving
// pods IPv4 addresses.
func refConfList(dataDir string) (*libcni.NetworkConfigList, error) {
	return refConfListFor(dataDir, "100.64.0.0/16", "0.0.0.0/0")
}

// refConfList6 is the reference giving pods IPv6 addresses, from a /80
// as a vpcnet node's pods get theirs.
func refConfList6(dataDir string) (*libcni.NetworkConfigList, error) {
	return refConfListFor(dataDir, "fd00:64::/80", "::/0")
}

// refConfListFor is ptp with host-local handing out subnet's addresses
// and a default route to dst.
func refConfListFor(dataDir, subnet, dst string) (*libcni.NetworkConfigList, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "bench-ref",
		"plugins": []any{map[string]any{
			"type": "ptp", "mtu": 9001, "ipMasq": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": dataDir,
				"ranges":  []any{[]any{map[string]any{"subnet": subnet}}},
				"routes":  []any{map[string]any{"dst": dst}},
			},
		}},
	}
	data, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromBytes(data)
}
