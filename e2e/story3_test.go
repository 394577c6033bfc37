package e2e

import (
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/doctor"
)

// Story 3: pods sat in ContainerCreating with a generic error when the
// subnet ran out or the instance could attach no more ENIs. vpcnet's ADD
// error says which, and doctor names it with the numbers.
func TestStory3SubnetExhaustedAndENILimit(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s3, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-tiny, az: us-west-2a, cidr: 10.0.0.0/28}
  - {id: subnet-big, az: us-west-2a, cidr: 10.0.16.0/24}
securityGroups: [sg-s3]
instanceTypes: [{name: x9.small, maxENIs: 2, ipv4PerENI: 4}]
instances:
  - {id: i-tiny, type: m5.large, subnet: subnet-tiny}
  - {id: i-small, type: x9.small, subnet: subnet-big}
attachDelay: 500ms
seed: 3
`, nil, true)
	tiny, small := c.Nodes[0], c.Nodes[1]

	t.Run("subnet exhausted", func(t *testing.T) {
		_, err := addUntilRefused(t, tiny, "tiny", 30)
		if err == nil || !strings.Contains(err.Error(), "subnet subnet-tiny has no free addresses") {
			t.Fatalf("ADD in a full subnet failed with %v; want the subnet named", err)
		}
		res := runDoctor(t, tiny, "--skip", "kubernetes")
		res.wantFinding(t, "subnet-exhausted", doctor.Error, "last EC2 error: create ENI in subnet-tiny: InsufficientFreeAddressesInSubnet", "larger subnet")
	})
	t.Run("ENI limit reached", func(t *testing.T) {
		_, err := addUntilRefused(t, small, "small", 30)
		if err == nil || !strings.Contains(err.Error(), "all 2 ENIs the instance type allows are attached and full") {
			t.Fatalf("ADD on a full instance failed with %v; want the ENI limit named", err)
		}
		res := runDoctor(t, small, "--skip", "kubernetes")
		res.wantFinding(t, "eni-limit-reached", doctor.Error, "instance type x9.small: at most 2 ENIs of 4 addresses", "larger instance type")
	})
}
