package cloud

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// DryRunTarget names the resources a DryRun probe asks about: this
// instance's own, so the answer is the one its real calls would get.
type DryRunTarget struct {
	InstanceID     string
	InstanceType   string
	SubnetID       string
	SecurityGroups []string
	// ENIID and AttachmentID are the primary ENI and its attachment.
	ENIID        string
	AttachmentID string
	// WithTags asks CreateNetworkInterface with the tags the agent gives
	// new ENIs, which needs ec2:CreateTags as well.
	WithTags bool
}

// Probed lists the actions DryRun can ask about. EC2 has no DryRun
// parameter for AssignPrivateIpAddresses and UnassignPrivateIpAddresses;
// a missing permission for those shows only when the call is made.
var Probed = []string{
	"DescribeNetworkInterfaces", "DescribeInstanceTypes", "DescribeSubnets",
	"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
	"DetachNetworkInterface", "DeleteNetworkInterface",
}

// DryRun asks EC2 whether this client may call action on t, with DryRun
// set: nothing changes. It returns nil when EC2 answers DryRunOperation
// ("Request would have succeeded, but DryRun flag is set."), an error for
// which IsUnauthorized holds when the credentials may not, and any other
// error (throttling, no answer) as it came: then the answer is unknown.
func (c *Client) DryRun(ctx context.Context, action string, t DryRunTarget) error {
	dry := aws.Bool(true)
	var call func(ctx context.Context) error
	switch action {
	case "DescribeNetworkInterfaces":
		call = func(ctx context.Context) error {
			_, err := c.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{DryRun: dry,
				Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{t.InstanceID}}}})
			return err
		}
	case "DescribeInstanceTypes":
		call = func(ctx context.Context) error {
			_, err := c.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{DryRun: dry,
				InstanceTypes: []types.InstanceType{types.InstanceType(t.InstanceType)}})
			return err
		}
	case "DescribeSubnets":
		call = func(ctx context.Context) error {
			_, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{DryRun: dry, SubnetIds: []string{t.SubnetID}})
			return err
		}
	case "CreateNetworkInterface":
		in := &ec2.CreateNetworkInterfaceInput{DryRun: dry, SubnetId: aws.String(t.SubnetID), Groups: t.SecurityGroups}
		if t.WithTags {
			in.TagSpecifications = []types.TagSpecification{{
				ResourceType: types.ResourceTypeNetworkInterface,
				Tags:         ec2Tags(ownerTags(c.instanceID, c.clusterName, c.now(), nil)),
			}}
		}
		call = func(ctx context.Context) error {
			_, err := c.ec2.CreateNetworkInterface(ctx, in)
			return err
		}
	case "AttachNetworkInterface":
		call = func(ctx context.Context) error {
			_, err := c.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{DryRun: dry,
				NetworkInterfaceId: aws.String(t.ENIID), InstanceId: aws.String(t.InstanceID), DeviceIndex: aws.Int32(1)})
			return err
		}
	case "ModifyNetworkInterfaceAttribute":
		call = func(ctx context.Context) error {
			_, err := c.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{DryRun: dry,
				NetworkInterfaceId: aws.String(t.ENIID),
				Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(t.AttachmentID), DeleteOnTermination: aws.Bool(true)}})
			return err
		}
	case "DetachNetworkInterface":
		call = func(ctx context.Context) error {
			_, err := c.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{DryRun: dry, AttachmentId: aws.String(t.AttachmentID)})
			return err
		}
	case "DeleteNetworkInterface":
		call = func(ctx context.Context) error {
			_, err := c.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{DryRun: dry, NetworkInterfaceId: aws.String(t.ENIID)})
			return err
		}
	default:
		return fmt.Errorf("DryRun %s: not an action vpcnet probes (want one of %v)", action, Probed)
	}
	// Not through call: a DryRun answer is an error response to the SDK,
	// but not an EC2 error the metrics should count.
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	c.log.Debug("EC2 DryRun", "action", action, "code", ErrorCode(err), "elapsed", time.Since(start))
	if ErrorCode(err) == "DryRunOperation" {
		return nil
	}
	if err == nil {
		return fmt.Errorf("DryRun %s: EC2 answered as if DryRun were not set", action)
	}
	return fmt.Errorf("DryRun %s: %w", action, compactError(err, 1))
}
