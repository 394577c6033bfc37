package doctor

import (
	"fmt"
	"strings"
)

// budgetFindings: issue 15. The EC2 budget controller as the agent sees
// it: not answering (the node spends the account's budget on its own,
// and at scale every node then learns of EC2's limits by being
// refused), and subnets it says are nearly full.
func budgetFindings(f Facts) []Finding {
	if f.Agent == nil || f.Agent.Status.Budget == nil {
		return nil
	}
	b := f.Agent.Status.Budget
	var out []Finding
	if b.AloneUntil != nil {
		out = append(out, Finding{
			ID: "budget-controller-unreachable", Severity: Warning,
			What:     fmt.Sprintf("the EC2 budget controller (lease %s) did not answer: this node calls EC2 on its own budget and asks again at %s", b.Lease, b.AloneUntil.UTC().Format("15:04:05")),
			Evidence: []string{"last failure: " + b.AloneBecause},
			Fix:      "check the vpcnet-budget Deployment in kube-system (kubectl -n kube-system get deploy,lease vpcnet-budget; its pods' logs) and that the node reaches the leader's address on its port; a single node is fine on its own, a cluster of hundreds may be throttled by EC2 until the controller is back",
		})
	}
	if len(b.SubnetsUnderPressure) > 0 {
		out = append(out, Finding{
			ID: "subnet-pressure", Severity: Info,
			What:     fmt.Sprintf("subnet %s is nearly full: this node keeps no warm addresses there and gives back what its pods do not use, so pods on any node can still get one", strings.Join(b.SubnetsUnderPressure, ", ")),
			Evidence: []string{"a node found it out of addresses (InsufficientFreeAddressesInSubnet) within the last 10 minutes, says the budget controller"},
			Fix:      "add addresses: a larger or additional subnet for pods (custom networking ENIConfig, or a subnet tagged kubernetes.io/role/cni=1 with subnet discovery); pods start slower while warm pools are off",
		})
	}
	return out
}
