package sim_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

func describeSubnets(e *env) error {
	_, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	return err
}

func TestSetFaultInjectsAndClears(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	e.cloud.SetFault("DescribeSubnets", sim.Fault{ErrorRate: 1, Code: "UnauthorizedOperation"})
	err := describeSubnets(e)
	wantCode(t, err, "UnauthorizedOperation")
	if got := httpStatus(t, err); got != 403 {
		t.Errorf("UnauthorizedOperation HTTP status = %d, want 403", got)
	}
	if _, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("a fault on DescribeSubnets broke DescribeInstances: %v", err)
	}

	e.cloud.SetFault("*", sim.Fault{ErrorRate: 1})
	err = describeSubnets(e)
	wantCode(t, err, "UnauthorizedOperation") // the named fault wins
	_, err = e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{})
	wantCode(t, err, "InternalError")
	if got := httpStatus(t, err); got != 500 {
		t.Errorf("InternalError HTTP status = %d, want 500", got)
	}

	e.cloud.SetFault("DescribeSubnets", sim.Fault{})
	e.cloud.SetFault("", sim.Fault{})
	if err := describeSubnets(e); err != nil {
		t.Errorf("after clearing: %v", err)
	}
}

func TestFaultsAreDeterministicForASeed(t *testing.T) {
	run := func(seed int64) []bool {
		e := newEnv(t, baseTopology, func(t *sim.Topology) {
			t.Seed = seed
			t.Faults = map[string]sim.FaultSpec{"DescribeSubnets": {ErrorRate: 0.5, Code: "InternalError"}}
		})
		var failed []bool
		for range 40 {
			failed = append(failed, describeSubnets(e) != nil)
		}
		return failed
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different failures:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 failed the same 40 calls; the seed is not used")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n < 8 || n > 32 {
		t.Errorf("%d of 40 calls failed at rate 0.5", n)
	}
}

func TestFaultLatencyWaitsBeforeAnswering(t *testing.T) {
	topo, err := sim.ParseTopology([]byte(baseTopology))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var slept []time.Duration
	cloud, err := sim.NewCloud(topo, sim.Options{
		Now: sim.NewManualClock(epoch).Now,
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			slept = append(slept, d)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	client := simtest.EC2Client(cloud.EC2Handler(), "AKIDSIM")
	cloud.SetFault("AttachNetworkInterface", sim.Fault{Latency: 200 * time.Millisecond})
	_, err = client.AttachNetworkInterface(context.Background(), &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String("eni-0000000000000dead"), InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(1),
	})
	if code := errorCode(t, err); code != "InvalidNetworkInterfaceID.NotFound" {
		t.Errorf("a latency-only fault changed the answer to %q", code)
	}
	if _, err := client.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(slept, []time.Duration{200 * time.Millisecond}) {
		t.Errorf("slept %v, want one 200ms wait for AttachNetworkInterface only", slept)
	}
}
