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
// Nothing is linked to the root namespace and every namespace carries the
// fabric's name prefix, so Sweep can remove what a crashed run left.
package fabric
