package kubecluster

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// TestAnIPv4ClusterKeepsItsAddresses: the family option changes nothing
// for the default cluster: the Service range, kube-dns's and the
// kubernetes Service's addresses, the API server's advertised address
// and bind address are what they were, and vpcnet gets no setting.
func TestAnIPv4ClusterKeepsItsAddresses(t *testing.T) {
	for _, f := range []Family{"", IPv4} {
		nw, err := networkOf(f)
		if err != nil {
			t.Fatal(err)
		}
		if nw.ServiceCIDR.String() != ServiceCIDR || nw.ClusterDNS.String() != ClusterDNS || nw.KubernetesService.String() != "10.96.0.1" ||
			nw.Advertise != APIAddress || nw.BindAddress != "0.0.0.0" || len(nw.AgentEnv) != 0 {
			t.Errorf("family %q: %+v", f, nw)
		}
	}
}

// TestAnIPv6ClusterIsSingleStackIPv6: Services in an IPv6 /112 (within
// kube-apiserver's limit of 20 bits), kube-dns at its tenth address, the
// API server advertising an IPv6 address, and vpcnet in aws-node's IPv6
// mode with NetworkPolicy enforced, as in the IPv4 cluster.
func TestAnIPv6ClusterIsSingleStackIPv6(t *testing.T) {
	nw, err := networkOf(IPv6)
	if err != nil {
		t.Fatal(err)
	}
	if !nw.ServiceCIDR.Addr().Is6() || 128-nw.ServiceCIDR.Bits() > 20 {
		t.Errorf("Service range %s: want IPv6 of at most 20 bits", nw.ServiceCIDR)
	}
	if nw.KubernetesService.String() != "fd00:10:96::1" || nw.ClusterDNS.String() != "fd00:10:96::a" {
		t.Errorf("kubernetes Service %s, kube-dns %s", nw.KubernetesService, nw.ClusterDNS)
	}
	if !nw.Advertise.Addr().Is6() || nw.BindAddress != "::" {
		t.Errorf("API server advertises %s, binds %s", nw.Advertise, nw.BindAddress)
	}
	if got := strings.Join(nw.AgentEnv, " "); got != "ENABLE_IPv6=true ENABLE_IPv4=false ENABLE_PREFIX_DELEGATION=true" {
		t.Errorf("vpcnet settings %q", got)
	}
	if _, err := networkOf("ipv5"); err == nil {
		t.Error("family ipv5 accepted")
	}
}

// TestAnIPv6NodeRegistersItsIPv6Address: the kubelet's node IP is the
// primary ENI's IPv6 address in an IPv6 cluster, and a node without one
// is refused with what its subnet needs.
func TestAnIPv6NodeRegistersItsIPv6Address(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("2600:1f14:abc:de01::5")
	ipv4, _ := networkOf(IPv4)
	ipv6, _ := networkOf(IPv6)
	if got, err := ipv4.nodeIP(v4, []netip.Addr{v6}); err != nil || got != v4 {
		t.Errorf("IPv4 cluster: %s, %v", got, err)
	}
	if got, err := ipv6.nodeIP(v4, []netip.Addr{v6}); err != nil || got != v6 {
		t.Errorf("IPv6 cluster: %s, %v", got, err)
	}
	if _, err := ipv6.nodeIP(v4, nil); err == nil || !strings.Contains(err.Error(), "assignIpv6AddressOnCreation") {
		t.Errorf("IPv6 cluster, node without IPv6: %v", err)
	}
}

// TestTheAddOnsAndKubeletFollowTheFamily: kube-dns's ClusterIP, kube-proxy's
// bind address and the kubelet's clusterDNS and address are the family's,
// and an IPv6 address reads back from YAML as the same string.
func TestTheAddOnsAndKubeletFollowTheFamily(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		nw, _ := networkOf(f)
		data, err := addonManifest("addons/coredns.yaml", nw)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := kubetest.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			if o.GetKind() == "Service" && o.GetName() == "kube-dns" {
				found = true
				if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip != nw.ClusterDNS.String() {
					t.Errorf("%s: kube-dns clusterIP %q, want %s", f, ip, nw.ClusterDNS)
				}
			}
		}
		if !found {
			t.Errorf("%s: no kube-dns Service", f)
		}
		data, err = addonManifest("addons/kube-proxy.yaml", nw)
		if err != nil {
			t.Fatal(err)
		}
		if objs, err = kubetest.Decode(data); err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "ConfigMap" {
				continue
			}
			conf, _, _ := unstructured.NestedString(o.Object, "data", "config.conf")
			var c struct{ BindAddress string }
			if err := yaml.Unmarshal([]byte(conf), &c); err != nil || c.BindAddress != nw.BindAddress {
				t.Errorf("%s: kube-proxy bindAddress %q (%v), want %s", f, c.BindAddress, err, nw.BindAddress)
			}
		}

		ip := netip.MustParseAddr("10.0.0.5")
		if f == IPv6 {
			ip = netip.MustParseAddr("2600:1f14:abc:de01::5")
		}
		var b strings.Builder
		if err := kubeletConfig.Execute(&b, struct {
			nodeSpec
			Hierarchies []string
		}{nodeSpec: nodeSpec{ID: "i-1", AZ: "us-west-2a", IP: ip, ClusterDNS: nw.ClusterDNS, Dir: "/n", Cgroup: "/c"}}); err != nil {
			t.Fatal(err)
		}
		var kc struct {
			Address    string
			ClusterDNS []string `json:"clusterDNS"`
		}
		if err := yaml.Unmarshal([]byte(b.String()), &kc); err != nil {
			t.Fatal(err)
		}
		if kc.Address != ip.String() || len(kc.ClusterDNS) != 1 || kc.ClusterDNS[0] != nw.ClusterDNS.String() {
			t.Errorf("%s: kubelet address %q clusterDNS %v", f, kc.Address, kc.ClusterDNS)
		}
	}
}
