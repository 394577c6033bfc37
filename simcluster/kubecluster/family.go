package kubecluster

import (
	"fmt"
	"net/netip"
)

// Family is the IP family a cluster's Services and pods use: the cluster
// is single-stack in it. Nodes keep both addresses of a dual-stack
// subnet either way, as EKS nodes do.
type Family string

const (
	// IPv4 is the default: Services in ServiceCIDR, pods with VPC IPv4
	// addresses.
	IPv4 Family = "ipv4"
	// IPv6 is an EKS IPv6 cluster: Services in an IPv6 range, kubelets
	// registered by their IPv6 address, kube-proxy and CoreDNS in IPv6,
	// and vpcnet in aws-node's IPv6 mode (a /80 per node, IPv4 egress
	// through the node, NetworkPolicy enforced in both: ipv6AgentEnv).
	// Every node's subnet must give its primary ENI an IPv6 address
	// (ipv6Cidr, assignIpv6AddressOnCreation).
	IPv6 Family = "ipv6"
)

// ipv6ServiceCIDR is the IPv6 cluster's ClusterIP range, kind's default
// for IPv6 clusters: kube-apiserver takes an IPv6 range of at most 20
// bits (/108), and a /112 holds 65,536 Services, as ServiceCIDR does.
const ipv6ServiceCIDR = "fd00:10:96::/112"

// apiAddress6 is where the API server also answers in an IPv6 cluster,
// and what it advertises as the kubernetes Service's endpoint (whose
// family must be the Service's): documentation space (RFC 3849) on the
// VPC router's loopback, as APIAddress is TEST-NET-1, outside the
// fabric's internet link (2001:db8:100::/64).
var apiAddress6 = netip.AddrPortFrom(netip.MustParseAddr("2001:db8:6443::1"), APIAddress.Port())

// ipv6AgentEnv puts vpcnet in aws-node's IPv6 mode, the settings aws-node
// itself requires together, with IPv4 egress through the node on (its
// default, ENABLE_V4_EGRESS): CoreDNS forwards to the VPC's resolver at
// its IPv4 address, as in an EKS IPv6 cluster. NetworkPolicy stays
// enforced, as in the IPv4 cluster: vpcnetd's ip6 policy table judges the
// pods' IPv6 traffic and its ip table their IPv4 egress through the
// node. Options.AgentEnv comes after these and can change them
// (VPCNET_NETWORK_POLICY=off).
var ipv6AgentEnv = []string{"ENABLE_IPv6=true", "ENABLE_IPv4=false", "ENABLE_PREFIX_DELEGATION=true"}

// network is everything about a cluster that depends on its family,
// worked out in one place: the control plane's flags, the kubelets'
// configuration and the add-ons' manifests all read it.
type network struct {
	Family Family
	// ServiceCIDR is the ClusterIP range; KubernetesService is its first
	// address (the kubernetes Service) and ClusterDNS its tenth (kube-dns,
	// as kubeadm chooses it), which every kubelet gives ClusterFirst pods.
	ServiceCIDR       netip.Prefix
	KubernetesService netip.Addr
	ClusterDNS        netip.Addr
	// Advertise is the API server's address the kubernetes Service's
	// endpoint names. APIAddress (IPv4) stays the cluster endpoint of every
	// kubeconfig: each node reaches it in either family.
	Advertise netip.AddrPort
	// BindAddress is the unspecified address kube-apiserver and
	// kube-proxy bind, of the cluster's family.
	BindAddress string
	// AgentEnv are the vpcnet settings of the family.
	AgentEnv []string
}

// networkOf works out the cluster's network for a family ("" is IPv4).
func networkOf(f Family) (network, error) {
	switch f {
	case "", IPv4:
		return newNetwork(IPv4, ServiceCIDR, APIAddress, "0.0.0.0", nil), nil
	case IPv6:
		return newNetwork(IPv6, ipv6ServiceCIDR, apiAddress6, "::", ipv6AgentEnv), nil
	}
	return network{}, fmt.Errorf("kubecluster: IP family %q: want %q or %q", f, IPv4, IPv6)
}

func newNetwork(f Family, cidr string, advertise netip.AddrPort, bind string, env []string) network {
	p := netip.MustParsePrefix(cidr)
	svc := p.Addr().Next()
	dns := p.Addr()
	for range 10 {
		dns = dns.Next()
	}
	return network{Family: f, ServiceCIDR: p, KubernetesService: svc, ClusterDNS: dns, Advertise: advertise, BindAddress: bind, AgentEnv: env}
}

// NodeIP is the address a node's kubelet registers (--node-ip) and serves
// on: its primary private IPv4 address, or in an IPv6 cluster the first
// IPv6 address of its primary ENI.
func (n network) nodeIP(privateIPv4 netip.Addr, primaryIPv6 []netip.Addr) (netip.Addr, error) {
	if n.Family != IPv6 {
		return privateIPv4, nil
	}
	if len(primaryIPv6) == 0 {
		return netip.Addr{}, fmt.Errorf("an IPv6 cluster needs every node's primary ENI to have an IPv6 address (give its subnet ipv6Cidr and assignIpv6AddressOnCreation: true)")
	}
	return primaryIPv6[0], nil
}

// ServiceRange is the cluster's ClusterIP range, in its family.
func (c *Cluster) ServiceRange() netip.Prefix { return c.net.ServiceCIDR }

// DNSAddress is the kube-dns Service's address, which every kubelet gives
// ClusterFirst pods.
func (c *Cluster) DNSAddress() netip.Addr { return c.net.ClusterDNS }
