package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// pluginDir holds the vpcnet binary built once for all tests.
var pluginDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vpcnet-plugin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "vpcnet"), ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build the plugin: %v\n%s", err, out)
		os.Exit(1)
	}
	pluginDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// harness runs the plugin binary the way containerd does: through libcni,
// from a thread in the node's network namespace, against a fake agent.
type harness struct {
	t     *testing.T
	node  ns.NetNS
	agent *fakeAgent
	cni   *libcni.CNIConfig
}

func newHarness(t *testing.T, free ...lease) *harness {
	t.Helper()
	h := &harness{t: t, node: netnstest.NewNS(t)}
	netnstest.Do(t, h.node, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	h.agent = startFakeAgent(t, free...)
	h.cni = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil)
	return h
}

// conflist is the network configuration at cniVersion, with extra fields
// merged into vpcnet's entry.
func (h *harness) conflist(version string, extra map[string]any) *libcni.NetworkConfigList {
	h.t.Helper()
	plugin := map[string]any{"type": "vpcnet", "socket": h.agent.socket}
	for k, v := range extra {
		plugin[k] = v
	}
	doc, err := json.Marshal(map[string]any{"cniVersion": version, "name": "vpcnet", "plugins": []any{plugin}})
	if err != nil {
		h.t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	return list
}

// pod is one sandbox: its namespace and the runtime's view of it.
type pod struct {
	ns   ns.NetNS
	rt   *libcni.RuntimeConf
	veth string
}

func (h *harness) newPod(name string) pod {
	h.t.Helper()
	p := pod{ns: netnstest.NewNS(h.t), veth: dataplane.HostVethName("eni", "default", name)}
	p.rt = &libcni.RuntimeConf{
		ContainerID: "sandbox-" + name, NetNS: p.ns.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", "sandbox-" + name}},
	}
	return p
}

// inNode runs f on a thread in the node's namespace, so the plugin the
// runtime execs starts there.
func (h *harness) inNode(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(h.t.Context(), 30*time.Second)
	defer cancel()
	var err error
	if nerr := h.node.Do(func(ns.NetNS) error { err = f(ctx); return nil }); nerr != nil {
		h.t.Fatal(nerr)
	}
	return err
}

func (h *harness) add(list *libcni.NetworkConfigList, p pod) (types.Result, error) {
	var res types.Result
	err := h.inNode(func(ctx context.Context) error {
		var err error
		res, err = h.cni.AddNetworkList(ctx, list, p.rt)
		return err
	})
	return res, err
}

func (h *harness) check(list *libcni.NetworkConfigList, p pod) error {
	return h.inNode(func(ctx context.Context) error { return h.cni.CheckNetworkList(ctx, list, p.rt) })
}

func (h *harness) del(list *libcni.NetworkConfigList, p pod) error {
	return h.inNode(func(ctx context.Context) error { return h.cni.DelNetworkList(ctx, list, p.rt) })
}

func (h *harness) status(list *libcni.NetworkConfigList) error {
	return h.inNode(func(ctx context.Context) error { return h.cni.GetStatusNetworkList(ctx, list) })
}

func (h *harness) gc(list *libcni.NetworkConfigList, valid ...pod) error {
	args := &libcni.GCArgs{}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.rt.ContainerID, IfName: p.rt.IfName})
	}
	return h.inNode(func(ctx context.Context) error { return h.cni.GCNetworkList(ctx, list, args) })
}

// nodeState lists the node's pod-related state: host veths, main-table
// routes and policy rules (kernel defaults left out).
func (h *harness) nodeState() []string {
	h.t.Helper()
	var out []string
	netnstest.Do(h.t, h.node, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		names := map[int]string{}
		for _, l := range links {
			names[l.Attrs().Index] = l.Attrs().Name
			if l.Attrs().Name != "lo" {
				out = append(out, "link "+l.Attrs().Name)
			}
		}
		// Both families, less the IPv6 routes the kernel makes for every
		// link (fe80::/64, multicast).
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
				continue
			}
			out = append(out, fmt.Sprintf("route %s dev %s", r.Dst, names[r.LinkIndex]))
		}
		rules, err := netlink.RuleList(netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Priority == 0 || r.Priority >= 32766 {
				continue
			}
			out = append(out, fmt.Sprintf("rule %d from %v to %v table %d", r.Priority, r.Src, r.Dst, r.Table))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func (h *harness) wantNodeState(want ...string) {
	h.t.Helper()
	slices.Sort(want)
	if got := h.nodeState(); !slices.Equal(got, want) {
		h.t.Errorf("node state:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// wantCNIError checks err is a CNI error with code and a message
// containing every part of want.
func wantCNIError(t *testing.T, err error, code uint, want ...string) {
	t.Helper()
	var e *types.Error
	if err == nil {
		t.Fatalf("no error, want CNI error %d", code)
	}
	if !asCNIError(err, &e) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	if e.Code != code {
		t.Errorf("CNI error code %d (%s), want %d", e.Code, e.Msg, code)
	}
	for _, w := range want {
		if !strings.Contains(e.Msg, w) {
			t.Errorf("CNI error message %q lacks %q", e.Msg, w)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func writeSysctl(path, value string) error { return os.WriteFile(path, []byte(value), 0o644) }
