package agent

import (
	"context"
	"fmt"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/limits"
)

// ipv6Refusal says why this node cannot run aws-node's IPv6 mode
// (ENABLE_IPv6=true), naming what is missing and the fix, before the
// agent has asked EC2 for anything: a type without prefix delegation
// (ipamd's isConfigValid refuses it too), a subnet without an IPv6 CIDR
// (EC2 would refuse the /80), or IMDS that shows no IPv6 for a subnet EC2
// says has it.
func (a *Agent) ipv6Refusal(ctx context.Context, self cloud.Self, lim limits.Limits) error {
	if !lim.SupportsPrefixDelegation() && lim.Hypervisor == limits.UnknownHypervisor {
		return fmt.Errorf("ENABLE_IPv6=true: vpcnetd cannot tell whether instance type %s takes the /80 prefix IPv6 pods take their addresses from: it is not in vpcnetd's table, EC2's DescribeInstanceTypes did not answer, and no prefix is attached; allow ec2:DescribeInstanceTypes (deploy/iam-policy.json) and restart, or set ENABLE_IPv6=false", self.InstanceType)
	}
	if !lim.SupportsPrefixDelegation() {
		return fmt.Errorf("ENABLE_IPv6=true: instance type %s is not a Nitro instance, so EC2 cannot give its primary ENI the /80 prefix IPv6 pods take their addresses from; run IPv6 pods on a Nitro instance type, or set ENABLE_IPv6=false", self.InstanceType)
	}
	if len(self.Primary.SubnetIPv6CIDRs) > 0 {
		return nil
	}
	subnet := self.Primary.SubnetID
	sns, err := a.cloud.DescribeSubnets(ctx, subnet)
	if err != nil {
		return fmt.Errorf("ENABLE_IPv6=true: IMDS shows no IPv6 CIDR for the primary ENI's subnet %s, and EC2 could not say whether it has one: %w", subnet, err)
	}
	if len(sns) == 1 && len(sns[0].IPv6CIDRs) > 0 {
		return fmt.Errorf("ENABLE_IPv6=true: IMDS shows no IPv6 for the primary ENI (network/interfaces/macs/%s/subnet-ipv6-cidr-blocks) though EC2 gives subnet %s the IPv6 CIDR %s; the agent takes the node's addresses from IMDS, so check the instance's metadata options (aws ec2 modify-instance-metadata-options) and restart", self.Primary.MAC, subnet, sns[0].IPv6CIDRs[0])
	}
	return fmt.Errorf("ENABLE_IPv6=true: subnet %s of the primary ENI has no IPv6 CIDR, so EC2 cannot give the node a /80 prefix; associate one (aws ec2 associate-subnet-cidr-block --subnet-id %s --ipv6-cidr-block ...) and restart, or set ENABLE_IPv6=false", subnet, subnet)
}
