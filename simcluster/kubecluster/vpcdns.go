package kubecluster

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// The VPC's resolver (AmazonProvidedDNS), at the VPC's base address plus
// two, as EC2 gives every VPC: the name server in every node's
// resolv.conf, and so where the cluster's CoreDNS forwards names outside
// cluster.local (kubeadm's Corefile, unchanged). Here it is a CoreDNS of
// its own in the VPC router's namespace that answers EC2's private DNS
// names (ip-A-B-C-D.REGION.compute.internal) with their address, as
// AmazonProvidedDNS does (and no data for their other types), and NXDOMAIN for every other name: the local
// cloud has no Internet, and no query leaves it.
var vpcCorefile = template.Must(template.New("Corefile").Parse(`.:53 {
    bind {{.Addr}}
    errors
    template IN A {{.Domain}} {
        match "^ip-(\d+)-(\d+)-(\d+)-(\d+)[.]{{.DomainRegexp}}[.]$"
        answer "{{"{{"}} .Name {{"}}"}} 60 IN A {{"{{"}} index .Match 1 {{"}}"}}.{{"{{"}} index .Match 2 {{"}}"}}.{{"{{"}} index .Match 3 {{"}}"}}.{{"{{"}} index .Match 4 {{"}}"}}"
        fallthrough
    }
    template IN ANY {{.Domain}} {
        match "^ip-(\d+)-(\d+)-(\d+)-(\d+)[.]{{.DomainRegexp}}[.]$"
        rcode NOERROR
        fallthrough
    }
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`))

// startVPCResolver puts the resolver's address on the router's loopback
// (the router answers ARP for it on every subnet, as EC2's .2 is
// reachable from every subnet) and starts CoreDNS there.
func (cp *controlPlane) startVPCResolver(addr netip.Addr, region string) error {
	if cp.bins.CoreDNS == "" {
		return fmt.Errorf("the VPC resolver needs CoreDNS (hack/kube-build.sh coredns)")
	}
	if err := addLoopbackAddr(cp.routerNS, addr); err != nil {
		return fmt.Errorf("VPC resolver address on the VPC router: %w", err)
	}
	conf, err := vpcResolverCorefile(addr, region)
	if err != nil {
		return err
	}
	corefile := filepath.Join(cp.dir, "vpc-dns", "Corefile")
	if err := writeFile(corefile, []byte(conf)); err != nil {
		return err
	}
	p, err := startProcess(cp.routerNS, filepath.Join(cp.dir, "logs", "vpc-dns.log"), cpEnv, cp.bins.CoreDNS, "-conf", corefile)
	if err != nil {
		return fmt.Errorf("VPC resolver: %w", err)
	}
	cp.procs = append(cp.procs, p)
	return joinCgroup(cp.hs, cp.cgroup, p.PID())
}

// vpcResolverCorefile is the resolver's configuration for a region.
func vpcResolverCorefile(addr netip.Addr, region string) (string, error) {
	domain := region + ".compute.internal"
	var b strings.Builder
	err := vpcCorefile.Execute(&b, struct{ Addr, Domain, DomainRegexp string }{addr.String(), domain, strings.ReplaceAll(regexp.QuoteMeta(domain), `\.`, `[.]`)})
	return b.String(), err
}
