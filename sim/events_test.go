package sim_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// next reads one event, failing if none comes soon. Delivery is
// asynchronous (a goroutine per subscriber), so this waits briefly.
func next(t *testing.T, ch <-chan sim.Event) sim.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return sim.Event{}
}

func TestSubscribeReplaysStateThenStreamsChanges(t *testing.T) {
	e := newEnv(t, baseTopology, withDelays(2*time.Second, time.Second))
	events, cancel := e.cloud.Subscribe()
	defer cancel()
	for _, in := range e.cloud.Instances() {
		ev := next(t, events)
		if ev.Kind != sim.ENIAttached || !ev.Initial || ev.InstanceID != in.ID || ev.NetworkInterfaceID != in.PrimaryENI ||
			ev.MAC != in.MAC || ev.DeviceIndex != 0 || !slices.Equal(ev.Addresses, []netip.Addr{in.PrivateIP}) {
			t.Errorf("initial event = %+v, want the primary ENI of %s", ev, in.ID)
		}
	}

	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(1)})
	id := aws.ToString(eni.NetworkInterfaceId)
	att := e.attach(id, "i-node1", 1)
	ev := next(t, events)
	if ev.Kind != sim.ENIAttaching || ev.NetworkInterfaceID != id || ev.InstanceID != "i-node1" || ev.DeviceIndex != 1 ||
		len(ev.Addresses) != 2 || !ev.Time.Equal(epoch) {
		t.Errorf("attaching event = %+v, want the attach begun at the call", ev)
	}
	// The attach completes on the clock alone: no API call needed.
	e.clock.Advance(2 * time.Second)
	ev = next(t, events)
	if ev.Kind != sim.ENIAttached || ev.Initial || ev.NetworkInterfaceID != id || ev.InstanceID != "i-node1" || ev.DeviceIndex != 1 ||
		len(ev.Addresses) != 2 || ev.SubnetCIDR != netip.MustParsePrefix("10.0.0.0/24") || !ev.Time.Equal(epoch.Add(2*time.Second)) {
		t.Errorf("attach event = %+v", ev)
	}

	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), Ipv4PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	ev = next(t, events)
	want := netip.MustParsePrefix(aws.ToString(out.AssignedIpv4Prefixes[0].Ipv4Prefix))
	if ev.Kind != sim.PrefixesAssigned || !slices.Equal(ev.Prefixes, []netip.Prefix{want}) || len(ev.Addresses) != 0 {
		t.Errorf("prefix event = %+v, want PrefixesAssigned %s", ev, want)
	}
	secondary := aws.ToString(eni.PrivateIpAddresses[1].PrivateIpAddress)
	if _, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), PrivateIpAddresses: []string{secondary}}); err != nil {
		t.Fatal(err)
	}
	ev = next(t, events)
	if ev.Kind != sim.AddressesUnassigned || !slices.Equal(ev.Addresses, []netip.Addr{netip.MustParseAddr(secondary)}) {
		t.Errorf("unassign event = %+v", ev)
	}

	if _, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(att)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	ev = next(t, events)
	if ev.Kind != sim.ENIDetached || ev.NetworkInterfaceID != id || ev.InstanceID != "i-node1" || len(ev.Prefixes) != 1 {
		t.Errorf("detach event = %+v", ev)
	}

	cancel()
	for range events {
		// drain until closed
	}
}

func TestTerminateEmitsDetachForEveryENI(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	events, cancel := e.cloud.Subscribe()
	defer cancel()
	for range e.cloud.Instances() {
		next(t, events) // initial state
	}
	if _, err := e.ec2.TerminateInstances(e.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-node2"}}); err != nil {
		t.Fatal(err)
	}
	ev := next(t, events)
	if ev.Kind != sim.ENIDetached || ev.InstanceID != "i-node2" || ev.DeviceIndex != 0 {
		t.Errorf("event = %+v, want the primary ENI of i-node2 detached", ev)
	}
	var state string
	for _, in := range e.cloud.Instances() {
		if in.ID == "i-node2" {
			state = in.State
		}
	}
	if state != "terminated" {
		t.Errorf("Instances() says i-node2 is %q", state)
	}
}

// A subscriber that laid a wire when the attach began hears when that
// attach will never complete.
func TestAnAttachCutShortByTerminationIsAnnouncedAsDetached(t *testing.T) {
	e := newEnv(t, baseTopology, withDelays(time.Minute, time.Second))
	events, cancel := e.cloud.Subscribe()
	defer cancel()
	for range e.cloud.Instances() {
		next(t, events) // initial state
	}
	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")})
	id := aws.ToString(eni.NetworkInterfaceId)
	e.attach(id, "i-node1", 1)
	if ev := next(t, events); ev.Kind != sim.ENIAttaching || ev.NetworkInterfaceID != id {
		t.Fatalf("event = %+v, want %s attaching", ev, id)
	}
	if _, err := e.ec2.TerminateInstances(e.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-node1"}}); err != nil {
		t.Fatal(err)
	}
	seen := false
	for !seen {
		ev := next(t, events)
		seen = ev.Kind == sim.ENIDetached && ev.NetworkInterfaceID == id && ev.InstanceID == "i-node1" && ev.DeviceIndex == 1
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	events, _ := e.cloud.Subscribe()
	e.cloud.Close()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel still open after Close")
		}
	}
}

// With the real clock a timer completes the attach: the event arrives with
// no further call.
func TestRealClockCompletesAttachOnItsOwn(t *testing.T) {
	topo, err := sim.ParseTopology([]byte(baseTopology))
	if err != nil {
		t.Fatal(err)
	}
	topo.AttachDelay = sim.Duration(5 * time.Millisecond)
	cloud, err := sim.NewCloud(topo, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	client := simtest.EC2Client(cloud.EC2Handler(), "AKIDSIM")
	ctx := context.Background()
	events, cancel := cloud.Subscribe()
	defer cancel()
	for range cloud.Instances() {
		next(t, events)
	}
	out, err := client.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: out.NetworkInterface.NetworkInterfaceId, InstanceId: aws.String("i-node1"), DeviceIndex: aws.Int32(1),
	}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events); ev.Kind != sim.ENIAttaching {
		t.Errorf("event = %+v, want the attach begun", ev)
	}
	if ev := next(t, events); ev.Kind != sim.ENIAttached || ev.NetworkInterfaceID != aws.ToString(out.NetworkInterface.NetworkInterfaceId) {
		t.Errorf("event = %+v, want the ENI attached", ev)
	}
}
