package sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/sim"
)

// multiCardTopology is a p4d.24xlarge launched with an EFA interface on
// network card 1 at device index 0 (as EFA launch templates place them),
// an efa-only interface on card 2, a trunk and an ENI tagged no_manage on
// card 0.
const multiCardTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
securityGroups: [sg-0sim]
instances:
  - id: i-gpu
    type: p4d.24xlarge
    subnet: subnet-a
    interfaces:
      - {type: efa, networkCard: 1, deviceIndex: 0}
      - {type: efa-only, networkCard: 2, deviceIndex: 0}
      - {type: trunk, deviceIndex: 1}
      - {deviceIndex: 2, secondaryAddresses: 2, tags: {node.k8s.amazonaws.com/no_manage: "true"}}
  - {id: i-p5, type: p5.48xlarge, subnet: subnet-a}
throttle: {disabled: true}
seed: 1
`

func TestLaunchWithInterfacesOnSeveralNetworkCards(t *testing.T) {
	e := newEnv(t, multiCardTopology, nil)
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{"i-gpu"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	type placed struct {
		typ        string
		card, dev  int32
		addrs      int
		noManage   bool
		deleteTerm bool
	}
	var got []placed
	for _, ni := range out.NetworkInterfaces {
		p := placed{typ: string(ni.InterfaceType), card: aws.ToInt32(ni.Attachment.NetworkCardIndex), dev: aws.ToInt32(ni.Attachment.DeviceIndex),
			addrs: len(ni.PrivateIpAddresses), deleteTerm: aws.ToBool(ni.Attachment.DeleteOnTermination)}
		for _, tg := range ni.TagSet {
			p.noManage = p.noManage || aws.ToString(tg.Key) == "node.k8s.amazonaws.com/no_manage"
		}
		if ni.InterfaceType == types.NetworkInterfaceTypeEfaOnly && aws.ToString(ni.PrivateIpAddress) != "" {
			t.Errorf("efa-only interface %s has address %s; EC2 gives it none", aws.ToString(ni.NetworkInterfaceId), aws.ToString(ni.PrivateIpAddress))
		}
		got = append(got, p)
	}
	want := map[placed]bool{
		{typ: "interface", card: 0, dev: 0, addrs: 1, deleteTerm: true}:                 true,
		{typ: "efa", card: 1, dev: 0, addrs: 1, deleteTerm: true}:                       true,
		{typ: "efa-only", card: 2, dev: 0, addrs: 0, deleteTerm: true}:                  true,
		{typ: "trunk", card: 0, dev: 1, addrs: 1, deleteTerm: true}:                     true,
		{typ: "interface", card: 0, dev: 2, addrs: 3, noManage: true, deleteTerm: true}: true,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d interfaces %+v, want %d", len(got), got, len(want))
	}
	for _, p := range got {
		if !want[p] {
			t.Errorf("unexpected interface %+v", p)
		}
	}

	// The filter on interface type answers from the model.
	efa, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("interface-type"), Values: []string{"efa"}}},
	})
	if err != nil || len(efa.NetworkInterfaces) != 1 {
		t.Fatalf("interface-type=efa: %d interfaces, err %v; want 1", len(efa.NetworkInterfaces), err)
	}

	// IMDS says which card each interface is on, and has no local-ipv4s
	// for the efa-only one.
	c, _ := e.imds("i-gpu")
	ifs, err := e.cloud.Interfaces("i-gpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		card := mustMetadata(t, c, "network/interfaces/macs/"+i.MAC+"/network-card")
		if want := []string{"0", "1", "2"}[i.NetworkCardIndex]; card != want {
			t.Errorf("IMDS network-card of %s = %q, want %q", i.ID, card, want)
		}
		_, err := metadata(t, c, "network/interfaces/macs/"+i.MAC+"/local-ipv4s")
		if (err == nil) == (i.InterfaceType == "efa-only") {
			t.Errorf("IMDS local-ipv4s of %s (%s): err %v", i.ID, i.InterfaceType, err)
		}
	}
}

func TestAttachCountsPerNetworkCard(t *testing.T) {
	e := newEnv(t, multiCardTopology, nil)
	// Card 0 of a p4d.24xlarge takes 15 interfaces; the primary, the
	// trunk and the no_manage ENI use three, the EFA on card 1 none.
	var attached int
	for dev := int32(3); ; dev++ {
		eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")})
		_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
			NetworkInterfaceId: eni.NetworkInterfaceId, InstanceId: aws.String("i-gpu"), DeviceIndex: aws.Int32(dev),
		})
		if err != nil {
			wantCode(t, err, "AttachmentLimitExceeded")
			break
		}
		attached++
	}
	if attached != 12 {
		t.Errorf("attached %d more ENIs on card 0, want 12 (15 less the three already there)", attached)
	}
	// Device index 0 on card 1 is the EFA's; card 3 is free.
	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), InterfaceType: types.NetworkInterfaceCreationTypeEfa})
	_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: eni.NetworkInterfaceId, InstanceId: aws.String("i-gpu"), DeviceIndex: aws.Int32(0), NetworkCardIndex: aws.Int32(1),
	})
	wantCode(t, err, "InvalidParameterValue")
	out, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: eni.NetworkInterfaceId, InstanceId: aws.String("i-gpu"), DeviceIndex: aws.Int32(0), NetworkCardIndex: aws.Int32(3),
	})
	if err != nil || aws.ToInt32(out.NetworkCardIndex) != 3 {
		t.Fatalf("attach on card 3: %v (card %d)", err, aws.ToInt32(out.NetworkCardIndex))
	}
}

func TestMultiCardInstanceTypes(t *testing.T) {
	e := newEnv(t, multiCardTopology, nil)
	out, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []types.InstanceType{"p4d.24xlarge", "p5.48xlarge"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ cards, perCard, total int32 }{
		"p4d.24xlarge": {4, 15, 60},
		"p5.48xlarge":  {32, 2, 64},
	}
	for _, it := range out.InstanceTypes {
		w := want[string(it.InstanceType)]
		ni := it.NetworkInfo
		if aws.ToInt32(ni.MaximumNetworkCards) != w.cards || len(ni.NetworkCards) != int(w.cards) || aws.ToInt32(ni.MaximumNetworkInterfaces) != w.total {
			t.Errorf("%s: %d cards (%d listed), %d interfaces; want %d cards, %d interfaces",
				it.InstanceType, aws.ToInt32(ni.MaximumNetworkCards), len(ni.NetworkCards), aws.ToInt32(ni.MaximumNetworkInterfaces), w.cards, w.total)
		}
		for _, card := range ni.NetworkCards {
			if aws.ToInt32(card.MaximumNetworkInterfaces) != w.perCard {
				t.Errorf("%s card %d takes %d interfaces, want %d", it.InstanceType, aws.ToInt32(card.NetworkCardIndex), aws.ToInt32(card.MaximumNetworkInterfaces), w.perCard)
			}
		}
	}
}

func TestTopologyRefusesMisplacedInterfaces(t *testing.T) {
	base := `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}, {id: subnet-c, az: us-west-2c, cidr: 10.0.2.0/24}]
securityGroups: [sg-0sim]
instances:
  - id: i-x
    type: %s
    subnet: subnet-a
    interfaces: [%s]
`
	for _, tc := range []struct{ typ, ifc, want string }{
		{"m5.large", "{deviceIndex: 0}", "already taken"},
		{"m5.large", "{networkCard: 1, deviceIndex: 1}", "network card(s)"},
		{"m5.large", "{type: branch, deviceIndex: 1}", "want interface, efa, efa-only or trunk"},
		{"m5.large", "{deviceIndex: 1, subnet: subnet-c}", "is in us-west-2c"},
		{"m5.large", "{deviceIndex: 1}, {deviceIndex: 2}, {deviceIndex: 3}", "takes 3 interfaces"},
		{"p4d.24xlarge", "{type: efa-only, networkCard: 1, deviceIndex: 0, secondaryAddresses: 1}", "no IP addresses"},
	} {
		_, err := sim.ParseTopology([]byte(fmt.Sprintf(base, tc.typ, tc.ifc)))
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s with [%s]: err %v, want one saying %q", tc.typ, tc.ifc, err, tc.want)
		}
	}
}

// The free /28 count is exact: a /26 has four blocks, the first and last
// hold reserved addresses, and one address in a block takes it.
func TestFreePrefixesIsExact(t *testing.T) {
	e := newEnv(t, `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-f, az: us-west-2a, cidr: 10.0.0.0/26}, {id: subnet-n, az: us-west-2a, cidr: 10.0.1.0/28}]
securityGroups: [sg-0sim]
instances: []
throttle: {disabled: true}
`, nil)
	count := func(id string) int {
		n, err := e.cloud.FreePrefixes(id)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count("subnet-f"); got != 2 {
		t.Fatalf("fresh /26: %d free /28s, want 2 (the first and last hold reserved addresses)", got)
	}
	if got := count("subnet-n"); got != 0 {
		t.Errorf("a /28 subnet: %d free /28s, want 0", got)
	}
	e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-f"), PrivateIpAddress: aws.String("10.0.0.24")})
	if got := count("subnet-f"); got != 1 {
		t.Errorf("one address in 10.0.0.16/28: %d free /28s, want 1", got)
	}
	e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-f"), PrivateIpAddress: aws.String("10.0.0.40")})
	if got, free := count("subnet-f"), e.freeAddresses("subnet-f"); got != 0 || free != 57 {
		t.Errorf("both middle blocks touched: %d free /28s and %d free addresses, want 0 and 57", got, free)
	}
	if _, err := e.cloud.FreePrefixes("subnet-x"); err == nil {
		t.Error("an unknown subnet has a count")
	}
}

// smallMultiCardTopology is a type of the topology's own with two network
// cards, so a test can have foreign interfaces on a node of five
// addresses per ENI.
const smallMultiCardTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}]
securityGroups: [sg-0sim]
instanceTypes: [{name: s3.multi, maxENIs: 3, ipv4PerENI: 5, networkCards: [3, 1]}]
instances:
- id: i-sim
  type: s3.multi
  subnet: subnet-a
  interfaces: [{type: efa, networkCard: 1, deviceIndex: 0}]
throttle: {disabled: true}
seed: 1
`

func TestTopologyInstanceTypeHasTheNetworkCardsItNames(t *testing.T) {
	e := newEnv(t, smallMultiCardTopology, nil)
	out, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"s3.multi"}})
	if err != nil || len(out.InstanceTypes) != 1 {
		t.Fatalf("DescribeInstanceTypes: %v, %d types", err, len(out.InstanceTypes))
	}
	ni := out.InstanceTypes[0].NetworkInfo
	var cards []string
	for _, c := range ni.NetworkCards {
		cards = append(cards, fmt.Sprintf("%d:%d", aws.ToInt32(c.NetworkCardIndex), aws.ToInt32(c.MaximumNetworkInterfaces)))
	}
	if got := fmt.Sprint(cards); got != "[0:3 1:1]" || aws.ToInt32(ni.MaximumNetworkInterfaces) != 4 {
		t.Errorf("cards %s, %d ENIs in all; want [0:3 1:1] and 4", got, aws.ToInt32(ni.MaximumNetworkInterfaces))
	}
	for _, bad := range []string{"networkCards: [2, 1]", "networkCards: [3, 0]"} {
		_, err := sim.ParseTopology([]byte(strings.Replace(smallMultiCardTopology, "networkCards: [3, 1]", bad, 1)))
		if err == nil || !strings.Contains(err.Error(), "networkCards") {
			t.Errorf("%s: err %v, want one naming networkCards", bad, err)
		}
	}
}
