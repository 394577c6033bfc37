package sim_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/sim"
)

func withDelays(attach, detach time.Duration) func(*sim.Topology) {
	return func(t *sim.Topology) {
		t.AttachDelay, t.DetachDelay = sim.Duration(attach), sim.Duration(detach)
	}
}

func TestENIStatesFollowAttachAndDetachDelays(t *testing.T) {
	e := newEnv(t, baseTopology, withDelays(2*time.Second, time.Second))
	id := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	attID := e.attach(id, "i-node1", 1)

	step := func(advance time.Duration, wantStatus types.NetworkInterfaceStatus, wantAttachment types.AttachmentStatus) {
		t.Helper()
		e.clock.Advance(advance)
		got := e.describeENI(id)
		if got.Status != wantStatus {
			t.Fatalf("after %v more: Status = %q, want %q", advance, got.Status, wantStatus)
		}
		switch {
		case wantAttachment == "" && got.Attachment != nil:
			t.Fatalf("after %v more: Attachment = %+v, want none", advance, got.Attachment)
		case wantAttachment != "" && (got.Attachment == nil || got.Attachment.Status != wantAttachment):
			t.Fatalf("after %v more: Attachment = %+v, want status %q", advance, got.Attachment, wantAttachment)
		}
	}
	step(0, types.NetworkInterfaceStatusAttaching, types.AttachmentStatusAttaching)
	step(1999*time.Millisecond, types.NetworkInterfaceStatusAttaching, types.AttachmentStatusAttaching)
	step(time.Millisecond, types.NetworkInterfaceStatusInUse, types.AttachmentStatusAttached)

	got := e.describeENI(id)
	if aws.ToString(got.Attachment.AttachmentId) != attID || aws.ToString(got.Attachment.InstanceId) != "i-node1" ||
		aws.ToInt32(got.Attachment.DeviceIndex) != 1 || aws.ToBool(got.Attachment.DeleteOnTermination) {
		t.Errorf("Attachment = %+v, want %s on i-node1 at device 1, not deleted on termination", got.Attachment, attID)
	}

	if _, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attID)}); err != nil {
		t.Fatalf("DetachNetworkInterface: %v", err)
	}
	step(0, types.NetworkInterfaceStatusDetaching, types.AttachmentStatusDetaching)
	step(999*time.Millisecond, types.NetworkInterfaceStatusDetaching, types.AttachmentStatusDetaching)
	step(time.Millisecond, types.NetworkInterfaceStatusAvailable, "")
}

func TestDetachWhileAttachingOrDetachingIsIncorrectState(t *testing.T) {
	e := newEnv(t, baseTopology, withDelays(time.Second, time.Second))
	id := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	attID := e.attach(id, "i-node1", 1)
	detach := func() error {
		_, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attID)})
		return err
	}
	wantCode(t, detach(), "IncorrectState")
	e.clock.Advance(time.Second)
	if err := detach(); err != nil {
		t.Fatalf("detach once attached: %v", err)
	}
	wantCode(t, detach(), "IncorrectState")
	e.clock.Advance(time.Second)
	wantCode(t, detach(), "InvalidAttachmentID.NotFound")
}

func TestAttachErrors(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(e *env, eniID string) *ec2.AttachNetworkInterfaceInput
		code   string
		status int
	}{
		{"unknown ENI", func(e *env, _ string) *ec2.AttachNetworkInterfaceInput {
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-0000000000000dead"), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(1)}
		}, "InvalidNetworkInterfaceID.NotFound", 400},
		{"unknown instance", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id), InstanceId: aws.String("i-nope"), DeviceIndex: aws.Int32(1)}
		}, "InvalidInstanceID.NotFound", 400},
		{"device index taken", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(0)}
		}, "InvalidParameterValue", 400},
		{"ENI already attached", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			e.attach(id, "i-node1", 1)
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(2)}
		}, "InvalidNetworkInterface.InUse", 400},
		{"network card the type lacks", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(1), NetworkCardIndex: aws.Int32(1)}
		}, "InvalidParameterValue", 400},
		{"ENI limit of the type", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			// x9.sim takes 2 ENIs: its primary and one more.
			other := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
			e.attach(other, "i-node2", 1)
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id), InstanceId: aws.String("i-node2"), DeviceIndex: aws.Int32(2)}
		}, "AttachmentLimitExceeded", 400},
		{"more addresses than the type allows per ENI", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			big := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(4)})
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: big.NetworkInterfaceId, InstanceId: aws.String("i-node2"), DeviceIndex: aws.Int32(1)}
		}, "PrivateIpAddressLimitExceeded", 400},
		{"other availability zone", func(e *env, id string) *ec2.AttachNetworkInterfaceInput {
			far := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-c")})
			return &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: far.NetworkInterfaceId, InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(1)}
		}, "InvalidParameterCombination", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, baseTopology, nil)
			id := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
			_, err := e.ec2.AttachNetworkInterface(e.ctx, tt.setup(e, id))
			wantCode(t, err, tt.code)
			if got := httpStatus(t, err); got != tt.status {
				t.Errorf("HTTP status = %d, want %d", got, tt.status)
			}
		})
	}
}

func TestPrimaryENICannotBeDetached(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	primary := e.describeENI(e.cloud.Instances()[0].PrimaryENI)
	if aws.ToInt32(primary.Attachment.DeviceIndex) != 0 || !aws.ToBool(primary.Attachment.DeleteOnTermination) {
		t.Fatalf("primary attachment = %+v, want device 0, deleted on termination", primary.Attachment)
	}
	_, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: primary.Attachment.AttachmentId})
	wantCode(t, err, "OperationNotPermitted")
}

func TestModifyNetworkInterfaceAttribute(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	id := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId
	attID := e.attach(*id, "i-node1", 1)
	calls := []*ec2.ModifyNetworkInterfaceAttributeInput{
		{NetworkInterfaceId: id, Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(attID), DeleteOnTermination: aws.Bool(true)}},
		{NetworkInterfaceId: id, Groups: []string{"sg-other", "sg-0sim"}},
		{NetworkInterfaceId: id, Description: &types.AttributeValue{Value: aws.String("renamed")}},
	}
	for _, in := range calls {
		if _, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, in); err != nil {
			t.Fatalf("ModifyNetworkInterfaceAttribute: %v", err)
		}
	}
	got := e.describeENI(*id)
	if !aws.ToBool(got.Attachment.DeleteOnTermination) {
		t.Error("DeleteOnTermination not set")
	}
	if len(got.Groups) != 2 || aws.ToString(got.Groups[0].GroupId) != "sg-other" {
		t.Errorf("Groups = %+v, want sg-other, sg-0sim", got.Groups)
	}
	if aws.ToString(got.Description) != "renamed" {
		t.Errorf("Description = %q", aws.ToString(got.Description))
	}

	bad := []struct {
		in   *ec2.ModifyNetworkInterfaceAttributeInput
		code string
	}{
		{&ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id}, "MissingParameter"},
		{&ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Groups: []string{"sg-nope"}}, "InvalidGroup.NotFound"},
		{&ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String("eni-attach-0000000000000bad"), DeleteOnTermination: aws.Bool(false)}}, "InvalidAttachmentID.NotFound"},
		{&ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String("eni-0000000000000dead"), Description: &types.AttributeValue{Value: aws.String("x")}}, "InvalidNetworkInterfaceID.NotFound"},
		{&ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id, Groups: []string{"sg-0sim"}, Description: &types.AttributeValue{Value: aws.String("x")}}, "InvalidParameterCombination"},
	}
	for _, b := range bad {
		_, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, b.in)
		wantCode(t, err, b.code)
	}
}

func TestTerminateHonoursDeleteOnTermination(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	free := e.freeAddresses("subnet-a")
	kept := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(2)}).NetworkInterfaceId)
	deleted := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	e.attach(kept, "i-node1", 1)
	att := e.attach(deleted, "i-node1", 2)
	if _, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(deleted),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(att), DeleteOnTermination: aws.Bool(true)},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := e.ec2.TerminateInstances(e.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-node1"}})
	if err != nil {
		t.Fatalf("TerminateInstances: %v", err)
	}
	if ch := out.TerminatingInstances[0]; ch.CurrentState.Name != types.InstanceStateNameTerminated || ch.PreviousState.Name != types.InstanceStateNameRunning {
		t.Errorf("state change = %v -> %v, want running -> terminated", ch.PreviousState.Name, ch.CurrentState.Name)
	}
	// The ENI without DeleteOnTermination is left behind, available: a leak.
	left := e.describeENI(kept)
	if left.Status != types.NetworkInterfaceStatusAvailable || left.Attachment != nil {
		t.Errorf("kept ENI: Status %q Attachment %+v, want available and detached", left.Status, left.Attachment)
	}
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{deleted}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	// The primary (deleted) and the second ENI gave back 2 addresses; the
	// leaked ENI still holds 3.
	if got := e.freeAddresses("subnet-a"); got != free-3+1 {
		t.Errorf("free addresses = %d, want %d (the leaked ENI's 3 still held, the primary's returned)", got, free-3+1)
	}
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(kept), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(1)})
	wantCode(t, err, "IncorrectInstanceState")
}
