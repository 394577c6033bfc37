package sim_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
)

func TestThrottleIsPerActionTokenBucket(t *testing.T) {
	e := newEnv(t, baseTopology, func(t *sim.Topology) {
		t.Throttle = sim.ThrottleSpec{
			Mutating: sim.BucketSpec{Burst: 3, Refill: 1},
			Describe: sim.BucketSpec{Burst: 2, Refill: 10},
		}
	})
	create := func() error {
		_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")})
		return err
	}
	for i := range 3 {
		if err := create(); err != nil {
			t.Fatalf("call %d within the burst: %v", i+1, err)
		}
	}
	err := create()
	wantCode(t, err, "RequestLimitExceeded")
	if got := httpStatus(t, err); got != 503 {
		t.Errorf("HTTP status = %d, want 503", got)
	}
	// Another action has its own bucket.
	if _, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"i-node1"}, Tags: tagList("k", "v")}); err != nil {
		t.Errorf("CreateTags, with its own bucket: %v", err)
	}
	// Describe actions use the describe bucket size.
	for range 2 {
		if _, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	wantCode(t, err, "RequestLimitExceeded")

	// One token comes back per second.
	e.clock.Advance(999 * time.Millisecond)
	wantCode(t, create(), "RequestLimitExceeded")
	e.clock.Advance(time.Millisecond)
	if err := create(); err != nil {
		t.Fatalf("after refill: %v", err)
	}
	wantCode(t, create(), "RequestLimitExceeded")
}

func TestThrottleDefaultsAreEC2s(t *testing.T) {
	e := newEnv(t, baseTopology, func(t *sim.Topology) { t.Throttle = sim.ThrottleSpec{} })
	// EC2's default bucket for the ENI mutating actions holds 100 tokens.
	for i := range 100 {
		if _, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"i-node1"}, Tags: tagList("k", "v")}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"i-node1"}, Tags: tagList("k", "v")})
	wantCode(t, err, "RequestLimitExceeded")
	// ...and refills 5 per second.
	e.clock.Advance(time.Second)
	for i := range 5 {
		if _, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"i-node1"}, Tags: tagList("k", "v")}); err != nil {
			t.Fatalf("refilled call %d: %v", i+1, err)
		}
	}
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{"i-node1"}, Tags: tagList("k", "v")})
	wantCode(t, err, "RequestLimitExceeded")
}

func TestSetThrottleReplacesTheBuckets(t *testing.T) {
	e := newEnv(t, baseTopology, func(t *sim.Topology) {
		t.Throttle = sim.ThrottleSpec{Describe: sim.BucketSpec{Burst: 1, Refill: 0.001}}
	})
	describe := func() error {
		_, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
		return err
	}
	if err := describe(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, describe(), "RequestLimitExceeded")
	if err := e.cloud.SetThrottle(sim.ThrottleSpec{Disabled: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := describe(); err != nil {
			t.Fatalf("call %d with throttling off: %v", i+1, err)
		}
	}
	// Back to a bucket of one, full.
	if err := e.cloud.SetThrottle(sim.ThrottleSpec{Describe: sim.BucketSpec{Burst: 1, Refill: 0.001}}); err != nil {
		t.Fatal(err)
	}
	if err := describe(); err != nil {
		t.Fatalf("first call after the buckets were replaced: %v", err)
	}
	wantCode(t, describe(), "RequestLimitExceeded")
	if err := e.cloud.SetThrottle(sim.ThrottleSpec{Describe: sim.BucketSpec{Burst: -1}}); err == nil {
		t.Error("a negative burst was accepted")
	}
}
