package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/fabric"
)

// binDir holds the plugin and the reference host-local IPAM plugin at the
// version go.mod pins, built once for every test (as `make build-sim`
// builds them).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vpcnet-egress-v4-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		binDir = dir
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(dir string) error {
	for _, s := range [][]string{
		{"go", "build", "-o", dir + "/", "."},
		{"go", "install", "github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1"},
	} {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %w\n%s", s, err, out)
		}
	}
	return nil
}

// The test world: a node with an IPv4 uplink to an internet namespace,
// which holds internetIP and has no route to the node's pods, so a
// connection from a pod completes only when the node SNATs it. Pods are
// made IPv6 by hand (vpcnet's IPv6 wiring is the agent's part of issue
// 27); the plugin wires their IPv4 egress through libcni.
const (
	nodeIP     = "10.0.0.10"
	routerIP   = "10.0.0.1"
	internetIP = "203.0.113.10"
	podNet6    = "2001:db8:1::"
)

type world struct {
	t        *testing.T
	prefix   string // of every namespace this test made
	node     ns.NetNS
	internet string // namespace path
	cni      *libcni.CNIConfig
	dataDir  string // host-local's
	pods     int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	netnstest.Require(t)
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, prefix: "vpcnet-e4-" + hex.EncodeToString(b) + "-", dataDir: t.TempDir()}
	t.Cleanup(func() {
		// Whatever a test left, also after a failure: only this test's
		// prefix, which no other run holds.
		if _, err := fabric.Sweep(w.prefix); err != nil {
			t.Errorf("remove the test's namespaces: %v", err)
		}
	})
	w.node = w.newNS("node")
	w.internet = w.newNS("internet").Path()
	w.link(w.node, "wan0", netip.MustParsePrefix(nodeIP+"/24"), w.ns(w.internet), "wan0", netip.MustParsePrefix(routerIP+"/24"))
	netnstest.Do(t, w.node, func() error {
		return netlink.RouteAdd(&netlink.Route{Dst: nil, Gw: net.ParseIP(routerIP)})
	})
	netnstest.Do(t, w.ns(w.internet), func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, &netlink.Addr{IPNet: ipnet(internetIP + "/32")})
	})
	w.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir}, t.TempDir(), nil)
	return w
}

// newNS makes a namespace of the test's prefix with lo up.
func (w *world) newNS(name string) ns.NetNS {
	w.t.Helper()
	path, err := fabric.CreateNS(w.prefix + name)
	if err != nil {
		w.t.Fatal(err)
	}
	n := w.ns(path)
	netnstest.Do(w.t, n, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	return n
}

func (w *world) ns(path string) ns.NetNS {
	w.t.Helper()
	n, err := ns.GetNS(path)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { n.Close() })
	return n
}

// link connects a and b by a veth, with an address on each end when valid.
func (w *world) link(a ns.NetNS, aName string, aAddr netip.Prefix, b ns.NetNS, bName string, bAddr netip.Prefix) {
	w.t.Helper()
	netnstest.Do(w.t, a, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName, PeerNamespace: netlink.NsFd(int(b.Fd()))}); err != nil {
			return fmt.Errorf("veth %s-%s: %w", aName, bName, err)
		}
		return upWithAddr(aName, aAddr)
	})
	netnstest.Do(w.t, b, func() error { return upWithAddr(bName, bAddr) })
}

func upWithAddr(name string, p netip.Prefix) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if p.IsValid() {
		// No DAD: nothing else holds the address, and a tentative one
		// cannot be used yet.
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipnet(p.String()), Flags: 0x02 /* IFA_F_NODAD */}); err != nil {
			return fmt.Errorf("add %s to %s: %w", p, name, err)
		}
	}
	return netlink.LinkSetUp(l)
}

func ipnet(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// pod is one sandbox: an IPv6 pod as vpcnet's IPv6 mode would wire it,
// and the result its ADD returned, which the egress plugin is chained to.
type pod struct {
	ns   ns.NetNS
	rt   *libcni.RuntimeConf
	prev *current.Result
}

func (w *world) newPod() pod {
	w.t.Helper()
	w.pods++
	name := fmt.Sprintf("pod%d", w.pods)
	p := pod{ns: w.newNS(name)}
	addr := netip.MustParsePrefix(fmt.Sprintf("%s%d/128", podNet6, w.pods))
	w.link(p.ns, "eth0", addr, w.node, fmt.Sprintf("eni%d", w.pods), netip.Prefix{})
	p.rt = &libcni.RuntimeConf{
		ContainerID: "sandbox-" + name, NetNS: p.ns.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}},
	}
	p.prev = &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: fmt.Sprintf("eni%d", w.pods)}, {Name: "eth0", Sandbox: p.ns.Path()}},
		IPs:        []*current.IPConfig{{Interface: current.Int(1), Address: *ipnet(addr.String())}},
	}
	return p
}

// entry is the plugin's conflist entry as cniconf renders it for the
// world's node, with host-local's dataDir in the test's directory and
// fields overridden by set (nil deletes one).
func (w *world) entry(set map[string]any) map[string]any {
	w.t.Helper()
	e := cniconf.EgressV4(netip.MustParseAddr(nodeIP), 1500, "")
	e.IPAM.DataDir = w.dataDir
	var m map[string]any
	b, err := json.Marshal(e)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		w.t.Fatal(err)
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// conf is the plugin's configuration for p at cniVersion: the entry with
// p's previous result, as a runtime chaining it after vpcnet passes it.
func (w *world) conf(version string, entry map[string]any, p pod) *libcni.PluginConfig {
	w.t.Helper()
	entry["cniVersion"], entry["name"] = version, "vpcnet"
	b, err := json.Marshal(entry)
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := libcni.NetworkPluginConfFromBytes(b)
	if err != nil {
		w.t.Fatal(err)
	}
	prev, err := p.prev.GetAsVersion(version)
	if err != nil {
		w.t.Fatal(err)
	}
	if c, err = libcni.InjectConf(c, map[string]any{"prevResult": prev}); err != nil {
		w.t.Fatal(err)
	}
	return c
}

// conflist is a network configuration list holding entry, as a runtime
// reads it from /etc/cni/net.d.
func (w *world) conflist(entry map[string]any) *libcni.NetworkConfigList {
	w.t.Helper()
	b, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "vpcnet", "plugins": []any{entry}})
	if err != nil {
		w.t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		w.t.Fatal(err)
	}
	return list
}

func (w *world) addList(list *libcni.NetworkConfigList, p pod) error {
	return w.inNode(func(ctx context.Context) error {
		_, err := w.cni.AddNetworkList(ctx, list, p.rt)
		return err
	})
}

// inNode runs f on a thread in the node's namespace, so the plugin the
// runtime execs starts there.
func (w *world) inNode(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(w.t.Context(), 30*time.Second)
	defer cancel()
	var err error
	if nerr := w.node.Do(func(ns.NetNS) error { err = f(ctx); return nil }); nerr != nil {
		w.t.Fatal(nerr)
	}
	return err
}

func (w *world) add(c *libcni.PluginConfig, p pod) (types.Result, error) {
	var res types.Result
	err := w.inNode(func(ctx context.Context) error {
		var err error
		res, err = w.cni.AddNetwork(ctx, c, p.rt)
		return err
	})
	return res, err
}

func (w *world) check(c *libcni.PluginConfig, p pod) error {
	return w.inNode(func(ctx context.Context) error { return w.cni.CheckNetwork(ctx, c, p.rt) })
}

func (w *world) del(c *libcni.PluginConfig, p pod) error {
	return w.inNode(func(ctx context.Context) error { return w.cni.DelNetwork(ctx, c, p.rt) })
}

// allocated lists the addresses host-local holds in the world's dataDir.
func (w *world) allocated() []string {
	w.t.Helper()
	ents, err := os.ReadDir(filepath.Join(w.dataDir, "vpcnet"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}
