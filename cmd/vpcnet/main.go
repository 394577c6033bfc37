// Command vpcnet is the CNI plugin of vpcnet: it asks the node agent
// (vpcnetd) for a VPC address over a root-only unix socket, wires the pod
// in the Amazon VPC CNI's shape, and returns the CNI result. It speaks CNI
// 0.4.0, 1.0.0 and 1.1.0 (ADD, DEL, CHECK, STATUS, GC, VERSION).
package main

import (
	"log"
	"os"
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	vpcnetversion "github.com/vpcnet/vpcnet/version"
)

// about is what the plugin prints when run with no CNI_COMMAND: the build
// goes here because CNI's VERSION result has a fixed shape (cniVersion,
// supportedVersions) that has no place for it.
var about = "vpcnet: VPC-native pod networking for Kubernetes on AWS (CNI plugin; the agent is vpcnetd) version " + vpcnetversion.Get().String()

func init() {
	// Namespace switches apply to the OS thread: keep main on one thread.
	runtime.LockOSThread()
}

func main() {
	if err := limitStdin(); err != nil {
		if perr := err.Print(); perr != nil {
			log.Print("write the error to stdout: ", perr)
		}
		os.Exit(1)
	}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		Status: cmdStatus,
		GC:     cmdGC,
	}, version.PluginSupports("0.4.0", "1.0.0", "1.1.0"), about)
}
