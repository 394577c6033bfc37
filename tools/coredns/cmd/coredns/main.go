// Command coredns is CoreDNS v1.15 (the module's pinned release) with the
// plugins a Kubernetes cluster's DNS and the local cloud's VPC resolver
// use, linked in the way CoreDNS documents for a build with fewer
// plugins ("compile-time enabling or disabling plugins"). The release's
// own main links every plugin, the cloud providers' SDKs among them
// (route53, azure, clouddns), and that doubled its cold build for nothing
// the local cloud runs. Plugin order stays the release's
// (dnsserver.Directives, unchanged); a Corefile that names a plugin left
// out fails at start-up with CoreDNS's own "unknown directive" error.
package main

import (
	"github.com/coredns/coredns/coremain"

	// kubeadm's and EKS's Corefile (simcluster/kubecluster/addons).
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	// The VPC resolver (simcluster/kubecluster/vpcdns.go).
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/template"

	// What an operator reaches for when debugging the cluster's DNS.
	_ "github.com/coredns/coredns/plugin/autopath"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/k8s_external"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() {
	coremain.Run()
}
