package doctor

import (
	"strings"
)

// awsNodeFindings: what the Amazon VPC CNI leaves when a cluster switches
// to vpcnet. Two CNIs on one node fight over addresses and routes.
func awsNodeFindings(f Facts) []Finding {
	var ev []string
	var fixes []string
	running := f.Kube != nil && f.Kube.AWSNodeDaemonSet
	if running {
		ev = append(ev, "DaemonSet kube-system/aws-node exists")
		fixes = append(fixes, "once vpcnet runs on every node: kubectl -n kube-system delete daemonset aws-node")
	}
	if f.Host != nil {
		// aws-node's ipam.json is not a leftover: vpcnetd reads it only
		// when it has no checkpoint of its own, and writes it as it stops,
		// so the node can be switched back to aws-node with its pods.
		var chains []string
		for _, c := range f.Host.Chains {
			if strings.HasPrefix(c.Chain, "AWS-") {
				chains = append(chains, c.Family+" "+c.Table+" "+c.Chain)
			}
		}
		if len(chains) > 0 {
			ev = append(ev, "its chains: "+strings.Join(chains, ", "))
			fixes = append(fixes, "remove its chains (iptables -t nat -F/-X AWS-SNAT-CHAIN-0, iptables -t mangle -F/-X AWS-CONNMARK-CHAIN-0, after removing the jumps to them) or reboot the node; vpcnet never touches other tables")
		}
	}
	if f.CNI != nil {
		for _, file := range f.CNI.Files {
			if strings.Contains(file, "aws") && file != f.CNI.Ours {
				ev = append(ev, "its CNI configuration "+file+" in "+f.CNI.ConfDir)
				fixes = append(fixes, "rm "+f.CNI.ConfDir+"/"+file)
			}
		}
	}
	if len(ev) == 0 {
		return nil
	}
	sev := Warning
	if running {
		sev = Error
	}
	return []Finding{{
		ID: "aws-node-leftovers", Severity: sev,
		What:     "the Amazon VPC CNI (aws-node) is still present on this node or cluster",
		Evidence: ev,
		Fix:      strings.Join(fixes, "; "),
	}}
}
