// Package fabric is the local cloud's network: it turns the emulator's
// EC2 state into Linux network namespaces so that vpcnetd and the vpcnet
// plugin run unmodified against something that behaves like a VPC.
//
// Each instance is a namespace whose interfaces are its attached ENIs,
// each the node end of a veth pair whose other end sits in one shared
// router namespace. The router knows every address EC2 has assigned (a /32
// or /28 route and a permanent neighbour entry on the owning ENI's link,
// as the VPC's mapping service does) and drops packets whose source address
// is not assigned to the ENI they came from (strict rp_filter), which is
// EC2's source/destination check. As a hypervisor hot-plugs each device
// on its own, every slot of an instance is mirrored independently; an
// ENI's wire and routes are laid while its attach is in flight and the
// node sees its interface (by its MAC) only when EC2 says attached. A
// further namespace outside the VPC
// stands for the internet. IMDS answers at 169.254.169.254 inside each
// node's namespace.
//
// IPv6 (ipv6.go, srccheck.go). On the wires of a dual-stack subnet the
// router answers at fe80::1, the gateway aws-node's IPv6 mode counts on;
// it routes each IPv6 address EC2 assigns as a /128 with a permanent
// neighbour entry, and each /80 prefix to the ENI's MAC (its next hop is
// the node's EUI-64 link-local address, a permanent entry), leaving the
// node to deliver within the prefix; the VPC's /56 is blackholed below
// those routes. rp_filter is IPv4 only, so an nftables table of the
// fabric's own (ip6 vpcnet-fabric) drops a forwarded packet whose source
// is not routed back over the wire it came in on: EC2's
// source/destination check. The router's default route leads to the
// internet namespace (InternetAddr6), which routes each VPC /56 back, so
// pods egress with their own addresses, no NAT66. An instance's primary
// interface gets what the OS takes from the VPC's router advertisement
// and DHCPv6: ::/0 via fe80::1 and its first IPv6 address as a /128.
// Addresses are added without duplicate address detection and awaited
// until the kernel has made them usable.
//
// Nothing is linked to the root namespace and every namespace carries the
// fabric's name prefix, so Sweep can remove what a crashed run left.
package fabric
