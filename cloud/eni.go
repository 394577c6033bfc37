package cloud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// CreateENIInput describes one ENI to create.
type CreateENIInput struct {
	SubnetID string
	// SecurityGroups of the ENI; empty means the VPC's default group.
	SecurityGroups []string
	Description    string
	// SecondaryAddresses or Prefixes (/28s) to create the ENI with, so a
	// new ENI is useful without a second call. At most one may be set.
	SecondaryAddresses int
	Prefixes           int
	// Tags added to the owner tags; the owner tags win on a clash.
	Tags map[string]string
	// ConnTrack sets the ENI's connection-tracking idle timeouts; the
	// zero value leaves EC2's defaults.
	ConnTrack ConnTrack
	// CreatedAt is recorded in TagCreatedAt; zero means now.
	CreatedAt time.Time
	// ClientToken makes the create idempotent: EC2 answers a request with a
	// token it has seen with the ENI it created then, not a second ENI.
	// Empty means derived from the owner and every field above. Within one
	// call the SDK's retries always reuse the token. To retry a create
	// across calls (after a timeout whose outcome is unknown), pass the
	// same input again with CreatedAt set, or the same ClientToken: EC2
	// compares the whole request, tags included, against the token.
	ClientToken string
}

// CreateENI creates an ENI owned by this client's instance, carrying its
// addresses or prefixes and the owner tags from the first moment, so a
// crash right after the call leaves an ENI the leak collector can find.
func (c *Client) CreateENI(ctx context.Context, in CreateENIInput) (ENI, error) {
	if err := c.checkCreate(in); err != nil {
		return ENI{}, fmt.Errorf("create ENI in %s: %w", in.SubnetID, err)
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = c.now()
	}
	token := in.ClientToken
	if token == "" {
		token = clientToken(c.instanceID, c.clusterName, in)
	}
	req := &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(in.SubnetID),
		ClientToken: aws.String(token),
		Groups:      slices.Clone(in.SecurityGroups),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags:         ec2Tags(ownerTags(c.instanceID, c.clusterName, in.CreatedAt, in.Tags)),
		}},
	}
	if in.Description != "" {
		req.Description = aws.String(in.Description)
	}
	req.ConnectionTrackingSpecification = in.ConnTrack.request()
	if in.SecondaryAddresses > 0 {
		req.SecondaryPrivateIpAddressCount = aws.Int32(int32(in.SecondaryAddresses))
	}
	if in.Prefixes > 0 {
		req.Ipv4PrefixCount = aws.Int32(int32(in.Prefixes))
	}
	var out *ec2.CreateNetworkInterfaceOutput
	err := c.call(ctx, "CreateNetworkInterface", func(ctx context.Context) error {
		var err error
		out, err = c.ec2.CreateNetworkInterface(ctx, req)
		return err
	})
	if err != nil {
		return ENI{}, fmt.Errorf("create ENI in %s: %w", in.SubnetID, err)
	}
	if out.NetworkInterface == nil {
		return ENI{}, fmt.Errorf("create ENI in %s: EC2 answered without the network interface", in.SubnetID)
	}
	eni, err := eniFromEC2(*out.NetworkInterface)
	if err != nil {
		return ENI{}, fmt.Errorf("create ENI in %s: %w", in.SubnetID, err)
	}
	return eni, nil
}

func (c *Client) checkCreate(in CreateENIInput) error {
	switch {
	case in.SubnetID == "":
		return errors.New("no subnet id")
	case c.instanceID == "":
		return errors.New("no owner for the tags: set Options.InstanceID (or let New learn it from IMDS)")
	case in.SecondaryAddresses < 0 || in.Prefixes < 0:
		return fmt.Errorf("negative count: %d addresses, %d prefixes", in.SecondaryAddresses, in.Prefixes)
	case in.SecondaryAddresses > 0 && in.Prefixes > 0:
		return fmt.Errorf("asked for %d addresses and %d prefixes: an ENI of vpcnet's holds one kind", in.SecondaryAddresses, in.Prefixes)
	case in.ConnTrack.TCPEstablished < 0 || in.ConnTrack.UDPStream < 0 || in.ConnTrack.UDP < 0:
		return fmt.Errorf("negative connection-tracking timeout: %+v", in.ConnTrack)
	case len(in.ClientToken) > 64:
		return fmt.Errorf("client token is %d characters; EC2 takes at most 64", len(in.ClientToken))
	}
	return nil
}

// AttachENI attaches eniID to instanceID at deviceIndex (on the default
// network card) and returns the attachment id. Picking a free index is the
// caller's job; see FreeDeviceIndex.
func (c *Client) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	var out *ec2.AttachNetworkInterfaceOutput
	err := c.call(ctx, "AttachNetworkInterface", func(ctx context.Context) error {
		var err error
		out, err = c.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
			NetworkInterfaceId: aws.String(eniID),
			InstanceId:         aws.String(instanceID),
			DeviceIndex:        aws.Int32(int32(deviceIndex)),
		})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("attach %s to %s at device %d: %w", eniID, instanceID, deviceIndex, err)
	}
	id := aws.ToString(out.AttachmentId)
	if id == "" {
		return "", fmt.Errorf("attach %s to %s at device %d: EC2 answered without an attachment id", eniID, instanceID, deviceIndex)
	}
	return id, nil
}

// SetDeleteOnTermination sets whether EC2 deletes eniID when its instance
// terminates. Set it right after attaching, so a node that dies leaks
// nothing.
func (c *Client) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error {
	err := c.call(ctx, "ModifyNetworkInterfaceAttribute", func(ctx context.Context) error {
		_, err := c.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(eniID),
			Attachment: &types.NetworkInterfaceAttachmentChanges{
				AttachmentId:        aws.String(attachmentID),
				DeleteOnTermination: aws.Bool(on),
			},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("set delete-on-termination=%t on %s (%s): %w", on, eniID, attachmentID, err)
	}
	return nil
}

// DetachENI starts detaching an attachment; the ENI goes through detaching
// to available. force detaches even when the instance does not answer,
// risking the OS's state of the interface. IsNotFound on the error means it
// was already detached.
func (c *Client) DetachENI(ctx context.Context, attachmentID string, force bool) error {
	err := c.call(ctx, "DetachNetworkInterface", func(ctx context.Context) error {
		_, err := c.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{
			AttachmentId: aws.String(attachmentID),
			Force:        aws.Bool(force),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("detach %s: %w", attachmentID, err)
	}
	return nil
}

// DeleteENI deletes an available (detached) ENI. IsNotFound on the error
// means it was already gone.
func (c *Client) DeleteENI(ctx context.Context, eniID string) error {
	err := c.call(ctx, "DeleteNetworkInterface", func(ctx context.Context) error {
		_, err := c.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{
			NetworkInterfaceId: aws.String(eniID),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", eniID, err)
	}
	return nil
}

// FreeDeviceIndex is the lowest device index in [0, max) not in used, and
// false when all are taken. max is the instance type's ENI limit.
func FreeDeviceIndex(used []int, max int) (int, bool) {
	for i := 0; i < max; i++ {
		if !slices.Contains(used, i) {
			return i, true
		}
	}
	return -1, false
}
