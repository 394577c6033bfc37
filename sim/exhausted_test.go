package sim_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// The error for a full subnet counts the whole request against the free
// addresses DescribeSubnets reports, so an operator comparing the two sees
// the same number. It used to count after the request's own primary
// address was taken: "1 requested, 0 free" while DescribeSubnets said 1.
func TestInsufficientAddressesErrorAgreesWithDescribeSubnets(t *testing.T) {
	tests := []struct {
		name     string
		call     func(e *env, eni string) error
		wantText string
	}{
		{"create: primary and one secondary with one free", func(e *env, _ string) error {
			_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-tiny"), SecondaryPrivateIpAddressCount: aws.Int32(1)})
			return err
		}, "2 requested, 1 free"},
		{"assign: two with one free", func(e *env, eni string) error {
			_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eni), SecondaryPrivateIpAddressCount: aws.Int32(2)})
			return err
		}, "2 requested, 1 free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, baseTopology, nil)
			// subnet-tiny is a /28: 11 usable addresses; leave one free.
			eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-tiny"), SecondaryPrivateIpAddressCount: aws.Int32(9)})
			free := e.freeAddresses("subnet-tiny")
			if free != 1 {
				t.Fatalf("setup: %d free, want 1", free)
			}
			err := tt.call(e, aws.ToString(eni.NetworkInterfaceId))
			wantCode(t, err, "InsufficientFreeAddressesInSubnet")
			if !contains(err.Error(), tt.wantText) || !contains(err.Error(), fmt.Sprintf("%d free", free)) {
				t.Errorf("error %q; want %q, agreeing with DescribeSubnets' %d available", err, tt.wantText, free)
			}
			if got := e.freeAddresses("subnet-tiny"); got != free {
				t.Errorf("the failed request changed the free count from %d to %d", free, got)
			}
		})
	}
}
