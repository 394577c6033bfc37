package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/cloud"
)

// TagNoManage is the Amazon VPC CNI's tag for ENIs the CNI must leave
// alone; vpcnet honours it too.
const TagNoManage = "node.k8s.amazonaws.com/no_manage"

// defaultLeakGrace is VPCNET_LEAKED_ENI_GRACE's default.
const defaultLeakGrace = 10 * time.Minute

// leakFindings: story 4. Available ENIs of this cluster keep subnet
// addresses until someone deletes them.
func leakFindings(f Facts) []Finding {
	if f.EC2 == nil || len(f.EC2.Leaked) == 0 {
		return nil
	}
	// An ENI is available for a moment between its create and its
	// attach; like the collector, only one older than the grace counts.
	grace := defaultLeakGrace
	if d, err := time.ParseDuration(f.setting("VPCNET_LEAKED_ENI_GRACE")); err == nil {
		grace = d
	}
	var ev []string
	for _, e := range f.EC2.Leaked {
		when := "no " + cloud.TagCreatedAt + " tag"
		if t, err := time.Parse(time.RFC3339, e.Tags[cloud.TagCreatedAt]); err == nil {
			if f.Now.Sub(t) < grace {
				continue
			}
			when = "created " + age(f.Now, t) + " ago"
		}
		owner := e.Tags[cloud.TagInstanceID]
		if owner == "" {
			owner = e.Tags[cloud.TagAWSInstanceID]
		}
		ev = append(ev, fmt.Sprintf("%s in %s, %s, %d addresses, by %s", e.ID, e.SubnetID, when, 1+len(e.Secondary)+16*len(e.Prefixes), orDash(owner)))
	}
	fix := "a running vpcnetd of the cluster deletes them after VPCNET_LEAKED_ENI_GRACE; if they stay, check that cleanup is on (DISABLE_LEAKED_ENI_CLEANUP) and that the role may call ec2:DeleteNetworkInterface, or delete them: aws ec2 delete-network-interface --network-interface-id ID"
	if strings.EqualFold(f.setting("DISABLE_LEAKED_ENI_CLEANUP"), "true") {
		fix = "this agent has DISABLE_LEAKED_ENI_CLEANUP=true: turn it off so vpcnetd deletes them after VPCNET_LEAKED_ENI_GRACE, or delete them: aws ec2 delete-network-interface --network-interface-id ID"
	}
	if len(ev) == 0 {
		return nil
	}
	return []Finding{{
		ID: "leaked-enis", Severity: Warning,
		What:     fmt.Sprintf("%d available ENIs with this cluster's tags sit in this node's subnets, holding addresses no pod can use", len(ev)),
		Evidence: ev,
		Fix:      fix,
	}}
}

// unmanagedFindings: interfaces on the instance that vpcnet must not use
// (EFA, trunk, or tagged no_manage). Not wrong, but they explain why the
// agent counts fewer ENIs than are attached.
func unmanagedFindings(f Facts) []Finding {
	if f.EC2 == nil {
		return nil
	}
	var ev []string
	for _, e := range f.EC2.ENIs {
		if e.DeviceIndex < 0 {
			continue
		}
		switch {
		case e.Tags[TagNoManage] == "true":
			ev = append(ev, fmt.Sprintf("%s (device %d) is tagged %s=true", e.ID, e.DeviceIndex, TagNoManage))
		case e.InterfaceType != "" && e.InterfaceType != "interface":
			ev = append(ev, fmt.Sprintf("%s (device %d) is of type %s", e.ID, e.DeviceIndex, e.InterfaceType))
		case e.NetworkCard != 0:
			ev = append(ev, fmt.Sprintf("%s (device %d) is on network card %d; vpcnet uses card 0 only", e.ID, e.DeviceIndex, e.NetworkCard))
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return []Finding{{
		ID: "interfaces-unmanaged", Severity: Info,
		What:     fmt.Sprintf("%d attached interfaces are not vpcnet's: it gives no pod an address on them and never detaches them", len(ev)),
		Evidence: ev,
		Fix:      "none if intended; those on network card 0 still count against its ENI limit, so fewer ENIs are left for pods; remove the no_manage tag if vpcnet should use one",
	}}
}

// deniedCodes are EC2's answers to a DryRun the role may not make.
var deniedCodes = []string{"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure"}

// permissionFindings: an EC2 action the node's role may not call.
func permissionFindings(f Facts) []Finding {
	if f.EC2 == nil {
		return nil
	}
	var ev []string
	for _, action := range slices.Sorted(maps.Keys(f.EC2.DryRun)) {
		if code := f.EC2.DryRun[action]; slices.Contains(deniedCodes, code) {
			ev = append(ev, fmt.Sprintf("ec2:%s: %s", action, code))
		}
	}
	if len(ev) == 0 {
		return nil
	}
	role := "the node's IAM role"
	if f.IMDS != nil && f.IMDS.Role != "" {
		role = "role " + f.IMDS.Role
	}
	return []Finding{{
		ID: "ec2-action-denied", Severity: Error,
		What:     fmt.Sprintf("%s may not call %d EC2 actions vpcnet needs (DryRun)", role, len(ev)),
		Evidence: ev,
		Fix:      "attach deploy/iam-policy.json (or AmazonEKS_CNI_Policy) to " + role + "; check SCPs and permission boundaries if it is attached already",
	}}
}

// imdsExposureFindings: seed 000. A pod that reaches IMDS gets the node
// role's credentials.
func imdsExposureFindings(f Facts) []Finding {
	var ev []string
	if f.EC2 != nil && f.EC2.Metadata != nil {
		m := f.EC2.Metadata
		if m.HTTPEndpoint != "disabled" {
			if m.HopLimit > 1 {
				ev = append(ev, fmt.Sprintf("HttpPutResponseHopLimit=%d: a token request from a pod (one hop more) gets an answer", m.HopLimit))
			}
			if m.HTTPTokens == "optional" {
				ev = append(ev, "HttpTokens=optional: IMDSv1 answers without a token, from any hop")
			}
		}
	} else if f.IMDS != nil && f.IMDS.V1Allowed != nil && *f.IMDS.V1Allowed {
		ev = append(ev, "IMDS answered a request without a session token (IMDSv1 allowed)")
	}
	if len(ev) == 0 {
		return nil
	}
	id := "INSTANCE"
	if f.IMDS != nil && f.IMDS.InstanceID != "" {
		id = f.IMDS.InstanceID
	}
	return []Finding{{
		ID: "imds-reachable-from-pods", Severity: Warning,
		What:     "pods on this node can reach IMDS and read the node role's credentials",
		Evidence: ev,
		Fix:      "aws ec2 modify-instance-metadata-options --instance-id " + id + " --http-tokens required --http-put-response-hop-limit 1 (vpcnetd runs on the host network and still reaches it); give pods their own credentials with IRSA or EKS Pod Identity",
	}}
}
