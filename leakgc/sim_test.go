package leakgc_test

// Story 4 on the local cloud: the real cloud client against the emulator's
// EC2 Query API over loopback, with the emulator and the collector on one
// manual clock.

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/leakgc"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

const topology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
securityGroups: [sg-0sim]
instances:
- {id: i-node1, type: m5.large, subnet: subnet-a}
- {id: i-node2, type: m5.4xlarge, subnet: subnet-a}
- {id: i-dead, type: m5.large, subnet: subnet-a}
attachDelay: 0s
detachDelay: 0s
imdsLag: 0s
seed: 1
`

var epoch = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

// world is a local cloud on a manual clock, with clients acting as
// different nodes of different clusters.
type world struct {
	t     *testing.T
	ctx   context.Context
	clock *sim.ManualClock
	url   string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	simtest.IsolateAWSEnv(t)
	clock := sim.NewManualClock(epoch)
	cl := simtest.New(t, topology, sim.Options{Now: clock.Now, AfterFunc: clock.AfterFunc})
	url := simtest.Serve(t, cl.EC2Handler())
	return &world{t: t, ctx: context.Background(), clock: clock, url: url}
}

// node is the cloud client of an agent on instance in cluster.
func (w *world) node(instance, cluster string) *cloud.Client {
	w.t.Helper()
	c, err := cloud.New(w.ctx, cloud.Options{
		Region:      "us-west-2",
		EC2Endpoint: w.url,
		NoIMDS:      true,
		InstanceID:  instance,
		ClusterName: cluster,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		MaxBackoff:  time.Millisecond,
		Registerer:  prometheus.NewRegistry(),
		Now:         w.clock.Now,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// create makes an ENI with 4 secondary addresses. The description keeps
// two creates by one node at one instant apart: EC2 would otherwise take
// the second for a retry of the first and return the same ENI.
func (w *world) create(c *cloud.Client, description string) string {
	w.t.Helper()
	e, err := c.CreateENI(w.ctx, cloud.CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 4, Description: description})
	if err != nil {
		w.t.Fatal(err)
	}
	return e.ID
}

func (w *world) attach(c *cloud.Client, eniID, instance string) string {
	w.t.Helper()
	att, err := c.AttachENI(w.ctx, eniID, instance, 1)
	if err != nil {
		w.t.Fatal(err)
	}
	return att
}

// collector is a leak collector for instance in cluster on the world's
// clock, with no delete pacing (the limiter is unit-tested).
func (w *world) collector(c *cloud.Client, instance, cluster string, collected *[]string) *leakgc.Collector {
	w.t.Helper()
	gc, err := leakgc.New(leakgc.Options{
		Cloud:         c,
		ClusterName:   cluster,
		InstanceID:    instance,
		DeleteLimiter: rate.NewLimiter(rate.Inf, 1),
		Clock:         w.clock,
		Logger:        slog.New(slog.DiscardHandler),
		Registerer:    prometheus.NewRegistry(),
		OnCollected:   func(e cloud.ENI) { *collected = append(*collected, e.ID) },
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return gc
}

// existing are the ids among ids that EC2 still has.
func (w *world) existing(c *cloud.Client, ids ...string) []string {
	w.t.Helper()
	enis, err := c.DescribeENIs(w.ctx, ids...)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range enis {
		out = append(out, e.ID)
	}
	return out
}

func (w *world) freeAddresses(c *cloud.Client) int {
	w.t.Helper()
	sns, err := c.DescribeSubnets(w.ctx, "subnet-a")
	if err != nil || len(sns) != 1 {
		w.t.Fatalf("describe subnet-a: %v, %v", sns, err)
	}
	return sns[0].AvailableAddresses
}

// leaks is the ENIs the scenario makes, at epoch unless said otherwise.
type leaks struct {
	deadDetached     string // i-dead attached it, detached it, died before deleting
	deadNeverAttach  string // i-dead created it and died before attaching
	own              string // i-node1 (the collector's node) created it and lost it
	inUse            string // attached to the live i-node2
	otherCluster     string // a staging node's, left available
	unknownAge       string // tagged for prod but with an unreadable created-at
	young            string // i-dead's, created 11 minutes after epoch
	ours, dead, live *cloud.Client
}

func scenario(w *world) leaks {
	t := w.t
	l := leaks{ours: w.node("i-node1", "prod"), dead: w.node("i-dead", "prod"), live: w.node("i-node2", "prod")}
	l.deadDetached = w.create(l.dead, "deadDetached")
	att := w.attach(l.dead, l.deadDetached, "i-dead")
	if err := l.dead.DetachENI(w.ctx, att, false); err != nil {
		t.Fatal(err)
	}
	l.deadNeverAttach = w.create(l.dead, "deadNeverAttach")
	l.own = w.create(l.ours, "own")
	l.inUse = w.create(l.live, "inUse")
	w.attach(l.live, l.inUse, "i-node2")
	l.otherCluster = w.create(w.node("i-other", "staging"), "otherCluster")

	raw := ec2.NewFromConfig(aws.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: aws.String(w.url),
	})
	out, err := raw.CreateNetworkInterface(w.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-a"),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{
				{Key: aws.String(cloud.TagClusterName), Value: aws.String("prod")},
				{Key: aws.String(cloud.TagInstanceID), Value: aws.String("i-dead")},
				{Key: aws.String(cloud.TagCreatedAt), Value: aws.String("last tuesday")},
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	l.unknownAge = aws.ToString(out.NetworkInterface.NetworkInterfaceId)

	w.clock.Advance(11 * time.Minute)
	l.young = w.create(l.dead, "young")
	return l
}

func (l leaks) all() []string {
	return []string{l.deadDetached, l.deadNeverAttach, l.own, l.inUse, l.otherCluster, l.unknownAge, l.young}
}

func sorted(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

func TestSimCollectsTheClustersLeakedENIs(t *testing.T) {
	w := newWorld(t)
	l := scenario(w)
	var collected []string
	gc := w.collector(l.ours, "i-node1", "prod", &collected)
	before := w.freeAddresses(l.ours)

	res, err := gc.Scan(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (leakgc.Result{Seen: 5, Deleted: 3, SkippedYoung: 1, SkippedUntagged: 1}); res != want {
		t.Errorf("Scan = %+v, want %+v", res, want)
	}
	if got, want := w.existing(l.ours, l.all()...), sorted(l.inUse, l.otherCluster, l.unknownAge, l.young); !slices.Equal(got, want) {
		t.Errorf("ENIs left %v, want %v (in use, other cluster, unknown age, young)", got, want)
	}
	if got, want := sorted(collected...), sorted(l.deadDetached, l.deadNeverAttach, l.own); !slices.Equal(got, want) {
		t.Errorf("OnCollected got %v, want %v", got, want)
	}
	// Each ENI held a primary and 4 secondary addresses.
	if got := w.freeAddresses(l.ours); got != before+3*5 {
		t.Errorf("subnet has %d free addresses after the scan, want %d + 15", got, before)
	}

	// The young one is kept while within the grace, taken right after,
	// and nothing else goes.
	w.clock.Advance(10 * time.Minute)
	if res, err := gc.Scan(w.ctx); err != nil || res.Deleted != 0 || res.SkippedYoung != 1 {
		t.Errorf("scan at the young ENI's grace = %+v, %v; want it kept", res, err)
	}
	w.clock.Advance(time.Second)
	if res, err := gc.Scan(w.ctx); err != nil || res.Deleted != 1 {
		t.Errorf("scan past the young ENI's grace = %+v, %v; want it deleted", res, err)
	}
	if got, want := w.existing(l.ours, l.all()...), sorted(l.inUse, l.otherCluster, l.unknownAge); !slices.Equal(got, want) {
		t.Errorf("ENIs left %v, want %v", got, want)
	}
}

func TestSimWithoutClusterNameCollectsOnlyOwnENIs(t *testing.T) {
	w := newWorld(t)
	l := scenario(w)
	var collected []string
	gc := w.collector(l.ours, "i-node1", "", &collected)
	res, err := gc.Scan(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (leakgc.Result{Seen: 1, Deleted: 1}); res != want {
		t.Errorf("Scan = %+v, want %+v", res, want)
	}
	if !slices.Equal(collected, []string{l.own}) {
		t.Errorf("collected %v, want only this instance's %s", collected, l.own)
	}
	if got := w.existing(l.ours, l.all()...); len(got) != len(l.all())-1 || slices.Contains(got, l.own) {
		t.Errorf("ENIs left %v, want all but %s", got, l.own)
	}
}

// racing is a node's cloud client that lets something else happen to the
// ENIs between the collector's listing and its first delete.
type racing struct {
	*cloud.Client
	before func()
}

func (r *racing) DeleteENI(ctx context.Context, id string) error {
	if r.before != nil {
		r.before()
		r.before = nil
	}
	return r.Client.DeleteENI(ctx, id)
}

func TestSimLeakDeletedByAnotherNodeFirstIsFine(t *testing.T) {
	w := newWorld(t)
	l := scenario(w)
	var first, second []string
	gcFirst := w.collector(l.ours, "i-node1", "prod", &first)
	slow := &racing{Client: l.live}
	slow.before = func() {
		if _, err := gcFirst.Scan(w.ctx); err != nil {
			t.Errorf("first collector: %v", err)
		}
	}
	gcSecond, err := leakgc.New(leakgc.Options{
		Cloud: slow, ClusterName: "prod", InstanceID: "i-node2",
		DeleteLimiter: rate.NewLimiter(rate.Inf, 1), Clock: w.clock,
		OnCollected: func(e cloud.ENI) { second = append(second, e.ID) },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := gcSecond.Scan(w.ctx)
	if err != nil {
		t.Fatalf("second collector: %v", err)
	}
	if want := (leakgc.Result{Seen: 5, Gone: 3, SkippedYoung: 1, SkippedUntagged: 1}); res != want {
		t.Errorf("second collector's Scan = %+v, want %+v", res, want)
	}
	if len(first) != 3 || len(second) != 0 {
		t.Errorf("collected %v by the first, %v by the second; want 3 by the first only", first, second)
	}
}

func TestSimLeakAttachedBeforeTheDeleteIsLeftAlone(t *testing.T) {
	w := newWorld(t)
	l := scenario(w)
	var collected []string
	r := &racing{Client: l.ours}
	// Between the listing and the deletes, another agent reuses every
	// leaked ENI by attaching it (odd, but legal, and never to be undone
	// by the collector).
	r.before = func() {
		for i, id := range []string{l.deadDetached, l.deadNeverAttach, l.own} {
			if _, err := l.live.AttachENI(w.ctx, id, "i-node2", 2+i); err != nil {
				t.Errorf("attach %s: %v", id, err)
			}
		}
	}
	gc, err := leakgc.New(leakgc.Options{
		Cloud: r, ClusterName: "prod", InstanceID: "i-node1",
		DeleteLimiter: rate.NewLimiter(rate.Inf, 1), Clock: w.clock,
		OnCollected: func(e cloud.ENI) { collected = append(collected, e.ID) },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := gc.Scan(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (leakgc.Result{Seen: 5, SkippedInUse: 3, SkippedYoung: 1, SkippedUntagged: 1}); res != want {
		t.Errorf("Scan = %+v, want %+v", res, want)
	}
	if got := w.existing(l.ours, l.all()...); len(got) != len(l.all()) || len(collected) != 0 {
		t.Errorf("ENIs left %v, collected %v; want every ENI kept", got, collected)
	}
}
