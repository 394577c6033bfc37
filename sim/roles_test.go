package sim_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// clientAs is an EC2 client signing with key as its access key ID.
func (e *env) clientAs(key string) *ec2.Client {
	return simtest.EC2Client(e.cloud.EC2Handler(), key)
}

const rolesTopology = baseTopology + `
roles:
  restricted: {deny: [DeleteNetworkInterface, CreateTags]}
`

// DryRun answers as EC2 does: DryRunOperation (412) when the caller may
// call the action, UnauthorizedOperation (403) naming the action when its
// role denies it; the same denial without DryRun. Tags on create need
// CreateTags too.
func TestRolesDenyActionsAndDryRunSaysSo(t *testing.T) {
	e := newEnv(t, strings.Replace(rolesTopology, "- {id: i-node1, type: m5.large, subnet: subnet-a}",
		"- {id: i-node1, type: m5.large, subnet: subnet-a, role: restricted}", 1), nil)
	node1, other := e.clientAs("i-node1"), e.clientAs("i-node2")
	eni := e.cloud.Instances()[0].PrimaryENI
	dry := aws.Bool(true)

	tests := []struct {
		name   string
		client *ec2.Client
		call   func(*ec2.Client) error
		code   string
		status int
		action string // named in the message
	}{
		{"allowed, DryRun", node1, func(c *ec2.Client) error {
			_, err := c.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), DryRun: dry})
			return err
		}, "DryRunOperation", http.StatusPreconditionFailed, ""},
		{"denied, DryRun", node1, func(c *ec2.Client) error {
			_, err := c.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni), DryRun: dry})
			return err
		}, "UnauthorizedOperation", http.StatusForbidden, "ec2:DeleteNetworkInterface"},
		{"denied, for real", node1, func(c *ec2.Client) error {
			_, err := c.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)})
			return err
		}, "UnauthorizedOperation", http.StatusForbidden, "ec2:DeleteNetworkInterface"},
		{"tags on create need CreateTags", node1, func(c *ec2.Client) error {
			_, err := c.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), DryRun: dry,
				TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}})
			return err
		}, "UnauthorizedOperation", http.StatusForbidden, "ec2:CreateTags"},
		{"an instance without a role", other, func(c *ec2.Client) error {
			_, err := c.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni), DryRun: dry})
			return err
		}, "DryRunOperation", http.StatusPreconditionFailed, ""},
		{"a key that is no instance", e.ec2, func(c *ec2.Client) error {
			_, err := c.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni), DryRun: dry})
			return err
		}, "DryRunOperation", http.StatusPreconditionFailed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(tt.client)
			if got := errorCode(t, err); got != tt.code {
				t.Fatalf("code %q, want %q: %v", got, tt.code, err)
			}
			if got := httpStatus(t, err); got != tt.status {
				t.Errorf("HTTP %d, want %d", got, tt.status)
			}
			var ae smithy.APIError
			errors.As(err, &ae)
			msg := ae.ErrorMessage()
			switch {
			case tt.code == "DryRunOperation" && msg != "Request would have succeeded, but DryRun flag is set.":
				t.Errorf("message %q", msg)
			case tt.action != "" && !strings.Contains(msg, "not authorized to perform: "+tt.action+" ") || tt.action != "" && !strings.Contains(msg, "assumed-role/restricted/i-node1"):
				t.Errorf("message %q does not name %s and the role", msg, tt.action)
			}
		})
	}
	// Nothing was deleted.
	if _, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eni}}); err != nil {
		t.Errorf("the primary ENI is gone: %v", err)
	}
}

func TestTopologyRolesAreChecked(t *testing.T) {
	for _, tt := range []struct{ edit, want string }{
		{"roles:\n  r: {deny: [DeleteEverything]}\n", `roles.r: deny: no such action "DeleteEverything"`},
		{"", `instance i-node1: role "missing" is not defined in roles`},
	} {
		topo := strings.Replace(baseTopology, "- {id: i-node1, type: m5.large, subnet: subnet-a}", "- {id: i-node1, type: m5.large, subnet: subnet-a, role: missing}", 1)
		if tt.edit != "" {
			topo = baseTopology + tt.edit
		}
		_, err := sim.ParseTopology([]byte(topo))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTopology = %v, want %q", err, tt.want)
		}
	}
}
