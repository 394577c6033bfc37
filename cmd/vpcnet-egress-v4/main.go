// Command vpcnet-egress-v4 gives IPv6 pods IPv4 egress through their node,
// vpcnet's counterpart of the Amazon VPC CNI's egress-cni plugin in IPv4
// mode (ENABLE_V4_EGRESS). Chained after vpcnet, it asks the delegated IPAM
// plugin (host-local, 169.254.172.0/22) for a node-local IPv4 address,
// gives the pod a second interface, v4if0, with that address and a default
// IPv4 route through the node, and adds the address to the nftables set
// that the node SNATs to its primary IPv4 address. It speaks CNI 0.4.0,
// 1.0.0 and 1.1.0 (ADD, DEL, CHECK, GC, VERSION; STATUS has nothing of its
// own to report). docs/egress-v4.md describes its configuration.
package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	vpcnetversion "github.com/vpcnet/vpcnet/version"
)

// about is what the plugin prints when run with no CNI_COMMAND.
var about = "vpcnet-egress-v4: IPv4 egress for IPv6 pods (CNI plugin, chained after vpcnet) version " + vpcnetversion.Get().String()

func init() {
	// Namespace switches apply to the OS thread: keep main on one thread.
	runtime.LockOSThread()
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC},
		version.PluginSupports("0.4.0", "1.0.0", "1.1.0"), about)
}
