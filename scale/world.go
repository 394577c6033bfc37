package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netfacts"
	"github.com/vpcnet/vpcnet/sim"
)

// Mutating lists the EC2 actions that change something; the account's
// mutating buckets hold them.
var mutating = map[string]bool{
	"CreateNetworkInterface": true, "AttachNetworkInterface": true, "DetachNetworkInterface": true,
	"DeleteNetworkInterface": true, "AssignPrivateIpAddresses": true, "UnassignPrivateIpAddresses": true,
	"ModifyNetworkInterfaceAttribute": true, "CreateTags": true, "AssignIpv6Addresses": true,
}

// dryRun marks a DryRun request's action in the counts.
const dryRun = " (DryRun)"

// transport carries one node's SDK requests to the emulator in process:
// EC2 by default, the node's own IMDS for 169.254.169.254. It counts the
// node's EC2 calls by action and the RequestLimitExceeded answers, with
// when they came.
type transport struct {
	ec2, imds http.Handler
	now       func() time.Time

	mu    sync.Mutex // guards below
	calls map[string]int
	// dry are the DryRun requests (the IAM preflight's), by action with
	// the dryRun suffix.
	dry       map[string]int
	throttled map[string]int
	// unreported are the actions refused since the budget controller
	// was last told.
	unreported []string
	// throttledAt are the times of RequestLimitExceeded answers, in order.
	throttledAt []time.Time
	total       int
}

func newTransport(ec2, imds http.Handler, now func() time.Time) *transport {
	return &transport{ec2: ec2, imds: imds, now: now, calls: map[string]int{}, dry: map[string]int{}, throttled: map[string]int{}}
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := t.ec2
	isIMDS := strings.HasPrefix(r.URL.Host, "169.254.169.254")
	if isIMDS {
		h = t.imds
	}
	var action string
	dry := false
	if r.Body != nil && !isIMDS {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if q, err := url.ParseQuery(string(body)); err == nil {
			action, dry = q.Get("Action"), q.Get("DryRun") == "true"
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	if isIMDS {
		return resp, nil
	}
	throttled := resp.StatusCode != http.StatusOK && bytes.Contains(rec.Body.Bytes(), []byte("<Code>RequestLimitExceeded</Code>"))
	t.mu.Lock()
	if dry {
		// A DryRun changes nothing, but EC2 counts it against the
		// action's bucket all the same: counted apart, so "no mutating
		// call" means no change.
		action += dryRun
		t.dry[action]++
	} else {
		t.calls[action]++
	}
	t.total++
	if throttled {
		t.throttled[action]++
		t.throttledAt = append(t.throttledAt, t.now())
		if !slices.Contains(t.unreported, action) {
			t.unreported = append(t.unreported, action)
		}
	}
	t.mu.Unlock()
	return resp, nil
}

// count is how many EC2 calls the node made so far.
func (t *transport) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// takeThrottled returns the actions refused since it was last called.
func (t *transport) takeThrottled() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.unreported
	t.unreported = nil
	return out
}

// reset forgets the counts: a scenario measures from its burst on.
func (t *transport) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls, t.dry, t.throttled, t.throttledAt, t.total = map[string]int{}, map[string]int{}, map[string]int{}, nil, 0
}

// throttledBetween says whether the node heard RequestLimitExceeded in
// [from, to).
func (t *transport) throttledBetween(from, to time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, _ := slices.BinarySearchFunc(t.throttledAt, from, func(a, b time.Time) int { return a.Compare(b) })
	return i < len(t.throttledAt) && t.throttledAt[i].Before(to)
}

// newClient is a production EC2 client aimed at the emulator through t.
// One attempt per call and no client-side buckets: both wait in wall
// time (see the package doc); the machine's backoff is on the clock.
func newClient(ctx context.Context, t *transport, instanceID string) (*cloud.Client, error) {
	buckets := map[string]cloud.Bucket{}
	for action := range cloud.DefaultBuckets() {
		buckets[action] = cloud.Bucket{Burst: 1 << 30, Refill: 1 << 30}
	}
	return cloud.New(ctx, cloud.Options{
		Region: "us-west-2", EC2Endpoint: "http://ec2.sim", IMDSEndpoint: "http://169.254.169.254",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "secret", ""),
		InstanceID:  instanceID, ClusterName: "scale", MaxAttempts: 1, HTTPClient: &http.Client{Transport: t},
		Buckets: buckets, Now: t.now,
	})
}

// host is a node's fake host: which address is routed to which pod.
type host struct {
	mu     sync.Mutex // guards routes
	routes map[netip.Addr]string
}

var _ executor.Host = (*host)(nil)

func (h *host) Setup(context.Context, executor.NodeNet) error      { return nil }
func (h *host) SetupENI(context.Context, executor.ENINet) error    { return nil }
func (h *host) TeardownENI(context.Context, executor.ENINet) error { return nil }

func (h *host) PodAddrs(context.Context) ([]nodestate.Route, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]nodestate.Route, 0, len(h.routes))
	for ip, name := range h.routes {
		out = append(out, nodestate.Route{Addr: ip, Link: hostVeth(ipam.Pod{Namespace: "default", Name: name})})
	}
	slices.SortFunc(out, func(a, b nodestate.Route) int { return a.Addr.Compare(b.Addr) })
	return out, nil
}

func (h *host) route(ip netip.Addr, name string) {
	h.mu.Lock()
	h.routes[ip] = name
	h.mu.Unlock()
}

func (h *host) unroute(ip netip.Addr, name string) {
	h.mu.Lock()
	if h.routes[ip] == name {
		delete(h.routes, ip)
	}
	h.mu.Unlock()
}

func hostVeth(p ipam.Pod) string { return netfacts.HostVethName("eni", p.Namespace, p.Name) }

// Account is the EC2 account the cluster runs in: its request buckets and
// its attach and detach delays.
type Account struct {
	// Mutating and Describe size every mutating and Describe* action's
	// bucket (EC2 keeps one bucket per action).
	Mutating, Describe sim.BucketSpec
	AttachDelay        time.Duration
	DetachDelay        time.Duration
	IMDSLag            time.Duration
}

// DefaultAccount is EC2's published request-token defaults as the
// emulator models them (sim.ThrottleSpec's defaults: 100 tokens refilled
// at 5/s per mutating action, 100 at 20/s per Describe action) and an
// attach taking a few seconds.
func DefaultAccount() Account {
	return Account{
		Mutating:    sim.BucketSpec{Burst: 100, Refill: 5},
		Describe:    sim.BucketSpec{Burst: 100, Refill: 20},
		AttachDelay: 3 * time.Second, DetachDelay: 2 * time.Second, IMDSLag: time.Second,
	}
}

// bucketFor is the bucket of action in acc.
func (acc Account) bucketFor(action string) sim.BucketSpec {
	if strings.HasPrefix(action, "Describe") {
		return acc.Describe
	}
	return acc.Mutating
}

// topology is nodes instances of instanceType, spread over subnets of the
// given prefix length (16 or more), one in each of the VPC's CIDRs.
func topology(acc Account, nodes int, instanceType string, subnets int, subnetBits int) *sim.Topology {
	t := &sim.Topology{
		Region: "us-west-2", VPC: sim.VPCSpec{ID: "vpc-0scale", CIDRs: []string{"10.0.0.0/8"}},
		SecurityGroups: []string{"sg-0scale"},
		AttachDelay:    sim.Duration(acc.AttachDelay), DetachDelay: sim.Duration(acc.DetachDelay), IMDSLag: sim.Duration(acc.IMDSLag),
		Throttle: sim.ThrottleSpec{Mutating: acc.Mutating, Describe: acc.Describe},
		Seed:     1,
	}
	// EC2 allows VPC CIDRs of /16 at most: one per subnet, 10.i.0.0/16.
	t.VPC.CIDRs = nil
	for i := range subnets {
		t.VPC.CIDRs = append(t.VPC.CIDRs, fmt.Sprintf("10.%d.0.0/16", i))
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), subnetBits)
		t.Subnets = append(t.Subnets, sim.SubnetSpec{ID: fmt.Sprintf("subnet-%02d", i), AZ: fmt.Sprintf("us-west-2%c", 'a'+i%3), CIDR: p.String()})
	}
	for i := range nodes {
		t.Instances = append(t.Instances, sim.InstanceSpec{ID: instanceID(i), Type: instanceType, Subnet: t.Subnets[i%subnets].ID})
	}
	return t
}

func instanceID(i int) string { return fmt.Sprintf("i-%017x", i+1) }
