package e2e

import (
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/doctor"
)

// Story 10: the node's role may not create ENIs (a policy missing
// ec2:CreateNetworkInterface). The primary ENI's addresses serve the
// first pods; the next ADD says the role is refused, and doctor's DryRun
// names the action.
func TestStory10EC2ActionDenied(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s10, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/22}]
securityGroups: [sg-s10]
instances: [{id: i-s10, type: m5.large, subnet: subnet-a}]
faults: {CreateNetworkInterface: {errorRate: 1, code: UnauthorizedOperation}}
seed: 10
`, nil, true)
	n := c.Nodes[0]
	_, err := addUntilRefused(t, n, "web", 30)
	if err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Fatalf("ADD once the primary ENI is full failed with %v; want EC2's refusal", err)
	}
	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "ec2-action-denied", doctor.Error, "ec2:CreateNetworkInterface: UnauthorizedOperation", "deploy/iam-policy.json")
}
