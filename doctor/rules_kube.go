package doctor

import (
	"fmt"
	"strings"
)

// shortName is a host name's first label: "ip-10-0-0-4" for both
// "ip-10-0-0-4" and "ip-10-0-0-4.us-west-2.compute.internal".
func shortName(s string) string {
	s, _, _ = strings.Cut(strings.ToLower(s), ".")
	return s
}

func privateDNS(f Facts) string {
	if f.EC2 != nil && f.EC2.PrivateDNSName != "" {
		return f.EC2.PrivateDNSName
	}
	if f.IMDS != nil {
		return f.IMDS.LocalHostname
	}
	return ""
}

func instanceID(f Facts) string {
	switch {
	case f.IMDS != nil && f.IMDS.InstanceID != "":
		return f.IMDS.InstanceID
	case f.Agent != nil && f.Agent.Status.InstanceID != "":
		return f.Agent.Status.InstanceID
	case f.EC2 != nil:
		return f.EC2.InstanceID
	}
	return ""
}

// identityFindings: story 6. The Node may be named after the private DNS
// name, not the host name; the agent must find it anyway, and the
// operator must know which name is which.
func identityFindings(f Facts) []Finding {
	var out []Finding
	if f.Kube != nil && f.Kube.Node == nil {
		ev := []string{"instance " + orDash(instanceID(f)) + ": no Node has providerID aws:///ZONE/" + orDash(instanceID(f)) + " or its name"}
		if f.Host != nil {
			ev = append(ev, "host name: "+f.Host.Hostname)
		}
		if dns := privateDNS(f); dns != "" {
			ev = append(ev, "EC2 PrivateDnsName: "+dns)
		}
		if f.Agent != nil && f.Agent.Status.Kubernetes.NodeProblem != "" {
			ev = append(ev, "agent: "+f.Agent.Status.Kubernetes.NodeProblem)
		}
		out = append(out, Finding{
			ID: "node-not-found", Severity: Error,
			What:     "the API server has no Node for this instance: kubelet has not registered it",
			Evidence: ev,
			Fix:      "read kubelet's log on the node (journalctl -u kubelet): Unauthorized means the node role is not mapped (see node-role-not-mapped); otherwise check kubelet's --hostname-override and --cloud-provider",
		})
	}
	var ev []string
	if f.Kube != nil && f.Kube.Node != nil {
		n := f.Kube.Node
		names := []string{"Node " + n.Name}
		mismatch := false
		if f.Host != nil && f.Host.Hostname != "" {
			names = append(names, "host name "+f.Host.Hostname)
			mismatch = mismatch || shortName(f.Host.Hostname) != shortName(n.Name)
		}
		if dns := privateDNS(f); dns != "" {
			names = append(names, "PrivateDnsName "+dns)
			mismatch = mismatch || shortName(dns) != shortName(n.Name)
		}
		if my := f.setting("MY_NODE_NAME"); my != "" && my != n.Name {
			names = append(names, "MY_NODE_NAME "+my)
			mismatch = true
		}
		if id := instanceID(f); n.ProviderID != "" && id != "" && !strings.HasSuffix(n.ProviderID, "/"+id) {
			names = append(names, "providerID "+n.ProviderID+" is not instance "+id)
			mismatch = true
		}
		if mismatch {
			ev = append(ev, strings.Join(names, ", ")+"; found by "+orDash(f.Kube.FoundBy))
		}
	}
	if f.Agent != nil && f.Agent.Status.Kubernetes.Mismatch != "" {
		ev = append(ev, "agent: "+f.Agent.Status.Kubernetes.Mismatch)
	}
	if len(ev) > 0 {
		out = append(out, Finding{
			ID: "node-name-mismatch", Severity: Warning,
			What:     "this node's names disagree: host name, Node name, EC2 PrivateDnsName and providerID do not all name the same thing",
			Evidence: ev,
			Fix:      "nothing breaks while vpcnet finds the Node by MY_NODE_NAME (the downward API's spec.nodeName) or its providerID; use the Node name shown with kubectl, and set MY_NODE_NAME from spec.nodeName in the DaemonSet if it is set by hand",
		})
	}
	return out
}

// authFindings: story 7. A node whose role is not in aws-auth never
// joins: kubelet gets Unauthorized.
func authFindings(f Facts) []Finding {
	var out []Finding
	if f.Host != nil && f.Host.KubeletUnauthorized != "" {
		out = append(out, Finding{
			ID: "kubelet-unauthorized", Severity: Error,
			What:     "kubelet's log shows the API server refusing it (Unauthorized)",
			Evidence: []string{"kubelet: " + f.Host.KubeletUnauthorized},
			Fix:      "map the node's instance role in aws-auth (mapRoles, groups system:bootstrappers and system:nodes) or create an EKS access entry of type EC2_LINUX for it",
		})
	}
	if f.Kube == nil || f.Kube.Node != nil || f.IMDS == nil || f.IMDS.Role == "" {
		return out
	}
	role := f.IMDS.Role
	ev := []string{"instance role from IMDS: " + role}
	switch {
	case f.Kube.AWSAuth != nil:
		for _, arn := range f.Kube.AWSAuth.RoleARNs {
			if strings.HasSuffix(arn, "/"+role) {
				return out // mapped: the cause is elsewhere (node-not-found says where to look)
			}
		}
		ev = append(ev, "kube-system/aws-auth mapRoles: "+listOrNone(f.Kube.AWSAuth.RoleARNs))
	case f.Kube.AWSAuthErr != "":
		ev = append(ev, "kube-system/aws-auth: "+f.Kube.AWSAuthErr+" (the cluster may use EKS access entries: aws eks list-access-entries)")
	default:
		ev = append(ev, "kube-system/aws-auth does not exist (with EKS access entries, check aws eks list-access-entries --cluster-name CLUSTER)")
	}
	if f.Host != nil && f.Host.KubeletUnauthorized != "" {
		ev = append(ev, "kubelet: "+f.Host.KubeletUnauthorized)
	}
	out = append(out, Finding{
		ID: "node-role-not-mapped", Severity: Error,
		What:     fmt.Sprintf("no Node for this instance, and its role %s is not mapped in aws-auth, so kubelet cannot register", role),
		Evidence: ev,
		Fix:      fmt.Sprintf("add to kube-system/aws-auth mapRoles: {rolearn: arn:aws:iam::ACCOUNT:role/%s, username: system:node:{{EC2PrivateDNSName}}, groups: [system:bootstrappers, system:nodes]}, or create an access entry of type EC2_LINUX for it", role),
	})
	return out
}
