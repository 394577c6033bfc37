package e2e

import (
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/doctor"
)

// Story 1: the agent had no limits for the node's instance type. Here the
// type is not in vpcnet's generated table and the role may not call
// DescribeInstanceTypes: the agent starts anyway, on the limits it
// observes, and pods beyond them wait. Doctor names both causes.
func TestStory1UnknownInstanceType(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s1, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/22}]
securityGroups: [sg-s1]
instanceTypes: [{name: x9.story, maxENIs: 3, ipv4PerENI: 10}]
instances: [{id: i-s1, type: x9.story, subnet: subnet-a}]
faults: {DescribeInstanceTypes: {errorRate: 1, code: UnauthorizedOperation}}
attachDelay: 1s
seed: 1
`, nil, true)
	n := c.Nodes[0]
	pods, err := addUntilRefused(t, n, "web", 40)
	if err == nil || !strings.Contains(err.Error(), "x9.story") {
		t.Errorf("ADD beyond the observed limits failed with %v; want an error naming the instance type", err)
	}
	t.Logf("%d pods got an address before ADD failed: %v", len(pods), err)

	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "limits-unknown", doctor.Error, "observed (instance type x9.story unknown", "ec2:DescribeInstanceTypes")
	res.wantFinding(t, "ec2-action-denied", doctor.Error, "ec2:DescribeInstanceTypes: UnauthorizedOperation", "deploy/iam-policy.json")
}
