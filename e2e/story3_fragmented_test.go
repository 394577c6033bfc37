package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
)

// Story 3, with prefix delegation: the subnet has plenty of addresses but
// none of its /28 blocks is whole, so EC2 refuses every prefix
// (InsufficientCidrBlocks). Two ENIs of someone else's, each with one
// address in the middle of a free block, fragment a /26 whose other two
// blocks hold the reserved addresses and the node. The node says
// subnet_fragmented with the free count and the fix, and its pods still
// start, on single secondary addresses, and reach each other (issue 12,
// point 3).
func TestStory3SubnetFragmentedForPrefixes(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s3f, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/26}]
securityGroups: [sg-s3f]
instances: [{id: i-s3f, type: m5.large, subnet: subnet-a, privateIp: 10.0.0.4}]
faults: {AssignPrivateIpAddresses: {errorRate: 1, code: InternalError}, CreateNetworkInterface: {errorRate: 1, code: InternalError}}
seed: 3
`, map[string][]string{"i-s3f": {"ENABLE_PREFIX_DELEGATION=true"}}, false)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	api := cloudAPI(t, c)
	// The faults keep the agent from taking a block before the subnet is
	// fragmented; the emulator's faults apply to this client too, so
	// they are lifted one action at a time.
	c.Cloud.SetFault("CreateNetworkInterface", sim.Fault{})
	for _, addr := range []string{"10.0.0.24", "10.0.0.40"} {
		if _, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
			SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String(addr), Description: aws.String("someone else's"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if free, err := c.Cloud.FreePrefixes("subnet-a"); err != nil || free != 0 {
		t.Fatalf("subnet-a has %d free /28s (%v), want 0", free, err)
	}
	c.Cloud.SetFault("AssignPrivateIpAddresses", sim.Fault{})
	var st introspect.Status
	poll(t, "the agent falls back to single addresses", 30*time.Second, func() (bool, error) {
		var err error
		st, err = status(t, n)
		return err == nil && st.PrefixFallback != nil, err
	})
	f := st.PrefixFallback
	if f.Reason != "subnet_fragmented" || f.SubnetID != "subnet-a" || f.FreeAddresses < 16 || !strings.Contains(f.Fix, "subnet-cidr-reservation") {
		t.Errorf("/v1/status prefixFallback = %+v, want subnet_fragmented in subnet-a with its free count and the fix", f)
	}
	if err := n.WaitReady(ctx); err != nil {
		t.Fatalf("the node on a fragmented subnet is not ready: %v", err)
	}
	var pods []*simcluster.Pod
	for i := range 3 {
		p, err := n.AddPod(ctx, fmt.Sprintf("web-%d", i))
		if err != nil {
			t.Fatalf("a pod on a fragmented subnet got no address: %v", err)
		}
		pods = append(pods, p)
	}
	if ok, errs := c.CheckInsideVPC(ctx, pods); ok == 0 || len(errs) > 0 {
		t.Errorf("pods on single addresses cannot reach each other: %d paths, errors %v", ok, errs)
	}

	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "subnet-fragmented", doctor.Error, "InsufficientCidrBlocks", "subnet CIDR reservation")
}
