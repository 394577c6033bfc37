package sim_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func tagMap(tags []types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

func TestCreateAndDeleteTags(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	id := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	_, err := e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{
		Resources: []string{id, "i-node1"},
		Tags:      []types.Tag{{Key: aws.String("owner"), Value: aws.String("i-node1")}, {Key: aws.String("created"), Value: aws.String("2026")}},
	})
	if err != nil {
		t.Fatalf("CreateTags: %v", err)
	}
	if got := tagMap(e.describeENI(id).TagSet); got["owner"] != "i-node1" || got["created"] != "2026" {
		t.Errorf("ENI tags = %v", got)
	}
	inst, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-node1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tagMap(inst.Reservations[0].Instances[0].Tags); got["owner"] != "i-node1" {
		t.Errorf("instance tags = %v", got)
	}

	// A value that does not match leaves the tag; a bare key removes it.
	if _, err := e.ec2.DeleteTags(e.ctx, &ec2.DeleteTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("owner"), Value: aws.String("someone-else")}, {Key: aws.String("created")}}}); err != nil {
		t.Fatalf("DeleteTags: %v", err)
	}
	if got := tagMap(e.describeENI(id).TagSet); len(got) != 1 || got["owner"] != "i-node1" {
		t.Errorf("after DeleteTags: %v, want only owner left", got)
	}

	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{id, "eni-0000000000000dead"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	if _, ok := tagMap(e.describeENI(id).TagSet)["k"]; ok {
		t.Error("a failed CreateTags tagged part of its resources")
	}
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("v")}}})
	wantCode(t, err, "InvalidParameterValue")

	var many []types.Tag
	for i := range 50 {
		many = append(many, types.Tag{Key: aws.String(fmt.Sprintf("k%d", i)), Value: aws.String("v")})
	}
	_, err = e.ec2.CreateTags(e.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: many})
	wantCode(t, err, "TagLimitExceeded")
}

func tagList(kv ...string) []types.Tag {
	var out []types.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}
