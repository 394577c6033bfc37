package simulation

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
)

// mutating are the EC2 actions that change something: invariant I3 counts
// them across a restart.
var mutating = map[string]bool{
	"CreateNetworkInterface": true, "AttachNetworkInterface": true, "DetachNetworkInterface": true,
	"DeleteNetworkInterface": true, "AssignPrivateIpAddresses": true, "UnassignPrivateIpAddresses": true,
	"ModifyNetworkInterfaceAttribute": true, "CreateTags": true,
	"AssignIpv6Addresses": true, "UnassignIpv6Addresses": true,
}

// transport carries the SDK's requests to the emulator's handlers in
// process: EC2 by default, IMDS for 169.254.169.254. It counts mutating
// calls, can make a call fail after EC2 performed it, and can cut the
// agent off after a number of calls (a crash in the middle of an action).
type transport struct {
	ec2, imds http.Handler

	mu sync.Mutex // guards below
	// mutations counts mutating calls the agent made.
	mutations int
	calls     map[string]int
	requests  int
	// lieNext makes the next mutating call report a 500 after EC2 did it.
	lieNext bool
	// budget, when >= 0, is how many more calls may reach EC2 before the
	// agent is cut off (its process died).
	budget int
	// onEC2 hears of every EC2 request, outside mu.
	onEC2 func(action string)
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := t.ec2
	imds := strings.HasPrefix(r.URL.Host, "169.254.169.254")
	if imds {
		h = t.imds
	}
	var action string
	if r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if q, err := url.ParseQuery(string(body)); err == nil {
			action = q.Get("Action")
		}
	}
	t.mu.Lock()
	if t.budget == 0 {
		t.mu.Unlock()
		return nil, fmt.Errorf("simulated crash: the agent died before %s", action)
	}
	if t.budget > 0 {
		t.budget--
	}
	lie := t.lieNext && mutating[action]
	if lie {
		t.lieNext = false
	}
	if mutating[action] {
		t.mutations++
	}
	t.calls[action]++
	t.requests++
	t.mu.Unlock()
	if !imds && t.onEC2 != nil {
		t.onEC2(action)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r.WithContext(r.Context()))
	resp := rec.Result()
	if lie && resp.StatusCode == http.StatusOK {
		// EC2 did it; the client hears a server error.
		resp.Body.Close()
		resp = &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {"text/xml"}},
			Body: io.NopCloser(strings.NewReader(`<Response><Errors><Error><Code>InternalError</Code><Message>simulated: done but reported failed</Message></Error></Errors><RequestID>sim</RequestID></Response>`))}
	}
	resp.Request = r
	return resp, nil
}

func (t *transport) mutationCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mutations
}

// total counts every request that reached the emulator.
func (t *transport) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requests
}

func (t *transport) setBudget(n int) {
	t.mu.Lock()
	t.budget = n
	t.mu.Unlock()
}

// newClient is a production EC2 client aimed at the emulator through t:
// no SDK retries (each would sleep in wall time; the agent's own backoff
// is on the manual clock) and buckets too deep to wait.
// Its created-at tags are on now, the schedule's clock, which the
// leaked-ENI collector ages them by.
func newClient(ctx context.Context, t *transport, instanceID string, now func() time.Time) (*cloud.Client, error) {
	buckets := map[string]cloud.Bucket{}
	for action := range cloud.DefaultBuckets() {
		buckets[action] = cloud.Bucket{Burst: 1 << 30, Refill: 1 << 30}
	}
	return cloud.New(ctx, cloud.Options{
		Region: "us-west-2", EC2Endpoint: "http://ec2.sim", IMDSEndpoint: "http://169.254.169.254",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "secret", ""),
		InstanceID:  instanceID, ClusterName: "sim", MaxAttempts: 1, HTTPClient: &http.Client{Transport: t},
		Buckets: buckets, Now: now,
	})
}

// host is the fake node: which address is routed to which live pod.
type host struct {
	mu     sync.Mutex // guards below
	routes map[netip.Addr]string
	fail   bool
}

var _ executor.Host = (*host)(nil)

func (h *host) Setup(context.Context, executor.NodeNet) error      { return nil }
func (h *host) SetupENI(context.Context, executor.ENINet) error    { return nil }
func (h *host) TeardownENI(context.Context, executor.ENINet) error { return nil }

func (h *host) PodAddrs(context.Context) ([]nodestate.Route, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		return nil, fmt.Errorf("simulated netlink dump failure")
	}
	out := make([]nodestate.Route, 0, len(h.routes))
	for ip, pod := range h.routes {
		out = append(out, nodestate.Route{Addr: ip, Link: hostVeth(ipam.Pod{Namespace: "default", Name: pod})})
	}
	slices.SortFunc(out, func(a, b nodestate.Route) int { return a.Addr.Compare(b.Addr) })
	return out, nil
}

// hostVeth is the Amazon VPC CNI's host veth name of a pod.
func hostVeth(p ipam.Pod) string { return netfacts.HostVethName("eni", p.Namespace, p.Name) }
