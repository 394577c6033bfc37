package cniconf

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

func TestInstalledConfigIsAValidConflistForLibcni(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		plugins []string
	}{
		{"plugin alone", Options{NetworkName: "vpcnet", Socket: "/run/vpcnet/vpcnetd.sock"}, []string{"vpcnet"}},
		{"hostPorts by vpcnet, bandwidth chained", Options{NetworkName: "vpcnet", Socket: "/s", HostPorts: true, Bandwidth: true}, []string{"vpcnet", "bandwidth"}},
		{"IPv4 egress of IPv6 pods chained next, as aws-node chains egress-cni", Options{NetworkName: "vpcnet", Socket: "/s", Bandwidth: true, EgressV4: egressV4Entry()},
			[]string{"vpcnet", EgressV4Type, "bandwidth"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Install(dir, DefaultName, tt.opts); err != nil {
				t.Fatal(err)
			}
			list, err := libcni.ConfListFromFile(filepath.Join(dir, DefaultName))
			if err != nil {
				t.Fatalf("libcni cannot parse the installed config: %v", err)
			}
			if list.Name != tt.opts.NetworkName {
				t.Errorf("network name = %q, want %q", list.Name, tt.opts.NetworkName)
			}
			var got []string
			for _, p := range list.Plugins {
				got = append(got, p.Network.Type)
			}
			if strings.Join(got, ",") != strings.Join(tt.plugins, ",") {
				t.Errorf("plugins = %v, want %v", got, tt.plugins)
			}
			if !strings.Contains(string(list.Plugins[0].Bytes), tt.opts.Socket) {
				t.Errorf("vpcnet entry does not carry the socket %s: %s", tt.opts.Socket, list.Plugins[0].Bytes)
			}
		})
	}
}

// libcni passes runtimeConfig.portMappings only to a plugin that declares
// the capability: without it a pod's hostPorts would silently not work.
func TestVpcnetDeclaresThePortMappingsCapability(t *testing.T) {
	data, err := Render(Options{NetworkName: "vpcnet", Socket: "/s", HostPorts: true})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if !list.Plugins[0].Network.Capabilities["portMappings"] {
		t.Errorf("the vpcnet entry does not declare portMappings: %s", list.Plugins[0].Bytes)
	}
}

func TestRenderRefusesIncompleteOptions(t *testing.T) {
	for _, opts := range []Options{{Socket: "/s"}, {NetworkName: "vpcnet"}} {
		if _, err := Render(opts); err == nil {
			t.Errorf("Render(%+v) succeeded", opts)
		}
	}
}

func TestInstallCreatesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "cni", "net.d")
	if err := Install(dir, DefaultName, Options{NetworkName: "vpcnet", Socket: "/s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultName)); err != nil {
		t.Fatal(err)
	}
}

// TestSupersedeMovesOnlyTheAmazonVPCCNIsEarlierConfigurationAside: after
// a switch-over the runtime would pick aws-node's 10-aws.conflist (it
// sorts first) and send new pods to an ipamd that is gone. Supersede
// moves just that file aside, where an operator still finds it, and
// leaves every other network's file as it was.
func TestSupersedeMovesOnlyTheAmazonVPCCNIsEarlierConfigurationAside(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"10-aws.conflist":    `{"cniVersion":"0.4.0","name":"aws-cni","plugins":[{"name":"aws-cni","type":"aws-cni"},{"type":"portmap"}]}`,
		"05-calico.conflist": `{"cniVersion":"0.4.0","name":"k8s-pod-network","plugins":[{"type":"calico"}]}`,
		"00-broken.conflist": `{not json`,
		"99-aws.conflist":    `{"cniVersion":"0.4.0","name":"aws-cni","plugins":[{"type":"aws-cni"}]}`,
		"notes.txt":          `{"type":"aws-cni"}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Install(dir, DefaultName, Options{NetworkName: "aws-cni", Socket: "/run/vpcnet/vpcnet.sock"}); err != nil {
		t.Fatal(err)
	}
	moved, err := Supersede(dir, DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "10-aws.conflist")}; !slices.Equal(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"00-broken.conflist", "05-calico.conflist", "10-aws.conflist" + SupersededSuffix, DefaultName, "99-aws.conflist", "notes.txt"}
	if !slices.Equal(left, want) {
		t.Errorf("directory holds %v, want %v", left, want)
	}
	// Twice is the same as once.
	if moved, err := Supersede(dir, DefaultName); err != nil || len(moved) != 0 {
		t.Errorf("second Supersede moved %v (%v)", moved, err)
	}
}

// The plugin makes a pod's veth before the agent says its address, so an
// IPv6 node's configuration says ipv6; an IPv4 node's is unchanged.
func TestRenderSaysIPv6OnlyOnAnIPv6Node(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		out, err := Render(Options{NetworkName: "aws-cni", Socket: "/run/vpcnet/vpcnetd.sock", IPv6: ipv6})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(out), `"ipv6": true`); got != ipv6 {
			t.Errorf("IPv6=%v: rendered\n%s", ipv6, out)
		}
		if !ipv6 && strings.Contains(string(out), "ipv6") {
			t.Errorf("an IPv4 node's configuration mentions ipv6:\n%s", out)
		}
	}
}
