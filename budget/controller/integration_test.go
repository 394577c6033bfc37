package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/budget/controller"
	"github.com/vpcnet/vpcnet/deploy"
	"github.com/vpcnet/vpcnet/internal/kubetest"
	"github.com/vpcnet/vpcnet/internal/testlog"
	"github.com/vpcnet/vpcnet/kube"
)

// These tests run the controller and the agent's lookup against a real
// kube-apiserver with RBAC on, as the service accounts of
// deploy/vpcnet.yaml. Its Role grants the controller only the Lease named
// vpcnet-budget in kube-system, so the tests share that Lease and run one
// after another, each starting from no Lease.

var shared kubetest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

const (
	ns        = "kube-system"
	leaseName = "vpcnet-budget"
)

// env is a cluster with deploy/vpcnet.yaml applied and no Lease.
type env struct {
	c     *kubetest.Cluster
	admin kubernetes.Interface
}

func setup(t *testing.T) *env {
	t.Helper()
	c := shared.Cluster(t)
	if err := c.Apply(t.Context(), deploy.Manifests()); err != nil {
		t.Fatalf("apply deploy/vpcnet.yaml: %v", err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	err = admin.CoordinationV1().Leases(ns).Delete(t.Context(), leaseName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return &env{c: c, admin: admin}
}

// as is a config of the service account ns/name.
func (e *env) as(t *testing.T, namespace, name string) *rest.Config {
	t.Helper()
	rc, err := e.c.ServiceAccountConfig(t.Context(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// replica is one running controller.
type replica struct {
	name     string
	endpoint string
	cancel   context.CancelFunc
	done     chan error
}

// startReplica runs a controller as the Deployment's service account,
// on loopback, with election timings short enough for a test.
func (e *env) startReplica(t *testing.T, name string) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := controller.Settings{
		Pod: name, Namespace: ns, PodIP: netip.MustParseAddr("127.0.0.1"), Lease: leaseName,
		LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second,
		Budget: budget.DefaultConfig(), Clients: []string{"system:serviceaccount:kube-system:vpcnet"},
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, endpoint: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	rc := e.as(t, ns, "vpcnet-budget")
	go func() {
		r.done <- controller.Run(ctx, controller.Options{Settings: s, REST: rc, Log: testlog.New(t, slog.LevelInfo).With("replica", name), Listener: ln})
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends the replica as SIGTERM would and waits for it.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("replica %s: %v", r.name, err)
		}
		r.done <- nil // a second stop returns at once
	case <-time.After(20 * time.Second):
		t.Errorf("replica %s did not stop within 20 s of its context's end", r.name)
	}
}

// reserve POSTs one request to the replica with token and returns the
// status and body.
func (r *replica) reserve(t *testing.T, token string) (int, string) {
	t.Helper()
	return r.ask(t, token, budget.Request{Node: "ip-10-0-0-1", Actions: []string{"CreateNetworkInterface"}, Urgent: true})
}

// ask POSTs req to the replica with token and returns the status and
// body.
func (r *replica) ask(t *testing.T, token string, req budget.Request) (int, string) {
	t.Helper()
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+r.endpoint+budgetapi.ReservePath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		hreq.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatalf("POST %s: %v", r.endpoint, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReady waits until the replica is ready: it has read the Lease.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "replica "+r.name+" is ready (it has read the Lease)", func() error {
		if code := r.get(t, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", code)
		}
		return nil
	})
}

func (r *replica) get(t *testing.T, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + r.endpoint + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond every 100 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentLookup is the agent's lookup of the leader, through the agent's
// own Kubernetes client, as the DaemonSet's service account.
func (e *env) agentLookup(t *testing.T) func(ctx context.Context) (string, error) {
	t.Helper()
	k, err := kube.NewForConfig(e.as(t, ns, "vpcnet"), kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (string, error) { return k.BudgetEndpoint(ctx, ns, leaseName) }
}

func TestOneReplicaLeadsTheOtherAnswers503AndTakesOverWhenTheLeaderStops(t *testing.T) {
	e := setup(t)
	lookup := e.agentLookup(t)
	if _, err := lookup(t.Context()); !errors.Is(err, kube.ErrNoBudgetLeader) || !strings.Contains(err.Error(), "lease kube-system/vpcnet-budget not found") {
		t.Fatalf("lookup before any replica ran: %v, want the Lease not found", err)
	}
	agentToken := e.as(t, ns, "vpcnet").BearerToken

	a := e.startReplica(t, "vpcnet-budget-a")
	eventually(t, 20*time.Second, "replica a leads, as the agent reads the Lease", func() error {
		ep, err := lookup(t.Context())
		if err == nil && ep != a.endpoint {
			err = fmt.Errorf("leader at %s, want %s", ep, a.endpoint)
		}
		return err
	})
	b := e.startReplica(t, "vpcnet-budget-b")
	b.waitReady(t)
	if code, msg := b.reserve(t, agentToken); code != http.StatusServiceUnavailable {
		t.Errorf("the replica that does not lead answered %d %s, want 503", code, msg)
	}
	code, msg := a.reserve(t, agentToken)
	var ans budgetapi.Answer
	if code != http.StatusOK || json.Unmarshal([]byte(msg), &ans) != nil || ans.DeferredMs != 0 {
		t.Errorf("the leader answered %d %s, want a grant", code, msg)
	}
	if code := a.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("the leader's /healthz answered %d", code)
	}

	// The leader stops as on SIGTERM: it releases the Lease, and b takes
	// over within its retry period, not the Lease's duration.
	stopped := time.Now()
	a.stop(t)
	eventually(t, 10*time.Second, "replica b takes over", func() error {
		ep, err := lookup(t.Context())
		if err == nil && ep != b.endpoint {
			err = fmt.Errorf("leader at %s, want %s", ep, b.endpoint)
		}
		return err
	})
	t.Logf("b led %v after a stopped", time.Since(stopped).Round(time.Millisecond))
	// The Lease names b a moment before b hears it won; an agent asking
	// in between gets 503 marked not-leader and steps aside for only
	// that pause.
	eventually(t, 2*time.Second, "the new leader grants", func() error {
		code, msg := b.reserve(t, agentToken)
		if code != http.StatusOK {
			return fmt.Errorf("answered %d %s", code, msg)
		}
		return nil
	})

	// The election recorded Events on the Lease (the Role's events:create).
	evs, err := e.admin.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + leaseName})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, ev := range evs.Items {
		msgs = append(msgs, ev.Message)
	}
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, "vpcnet-budget-a 127.0.0.1") || !strings.Contains(all, "vpcnet-budget-b 127.0.0.1") ||
		!strings.Contains(all, "became leader") {
		t.Errorf("Events on the Lease:\n%s\nwant each replica's \"became leader\"", all)
	}

	// With no replica left, the Lease is released: no leader.
	b.stop(t)
	if _, err := lookup(t.Context()); !errors.Is(err, kube.ErrNoBudgetLeader) {
		t.Errorf("lookup after every replica stopped: %v, want no leader", err)
	}
}

func TestTheAgentsTokenIsAcceptedAndOthersAreRefused(t *testing.T) {
	e := setup(t)
	lookup := e.agentLookup(t)
	r := e.startReplica(t, "vpcnet-budget-a")
	eventually(t, 20*time.Second, "the replica leads", func() error { _, err := lookup(t.Context()); return err })

	// The agent's own client, end to end: the Lease, the token, a grant.
	var outcome string
	agentCfg := e.as(t, ns, "vpcnet")
	client := budgetapi.NewClient(budgetapi.ClientOptions{
		Node: "ip-10-0-0-1", Endpoint: lookup,
		Token:   func() (string, error) { return agentCfg.BearerToken, nil },
		Observe: func(o string, _ time.Duration) { outcome = o },
	})
	if err := client.Acquire(t.Context(), []string{"CreateNetworkInterface", "AttachNetworkInterface"}, func() budgetapi.Need { return budgetapi.Need{Urgent: true} }); err != nil || outcome != budgetapi.Granted {
		t.Errorf("the agent's Acquire: %v, outcome %q, want granted by the controller", err, outcome)
	}

	// Another service account in the cluster: authenticated, not allowed.
	other := e.c.TestNamespace(t)
	if code, msg := r.reserve(t, e.as(t, other, "default").BearerToken); code != http.StatusForbidden ||
		!strings.Contains(msg, "system:serviceaccount:"+other+":default may not reserve") {
		t.Errorf("another service account's token: %d %q, want 403 naming it", code, msg)
	}
	// The controller's own token is no agent's either.
	if code, _ := r.reserve(t, e.as(t, ns, "vpcnet-budget").BearerToken); code != http.StatusForbidden {
		t.Errorf("the controller's own token: %d, want 403", code)
	}
	if code, msg := r.reserve(t, "forged.token.value"); code != http.StatusForbidden || !strings.Contains(msg, "token refused by the API server") {
		t.Errorf("a forged token: %d %q, want 403", code, msg)
	}
	if code, _ := r.reserve(t, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, msg := r.reserve(t, agentCfg.BearerToken); code != http.StatusOK {
		t.Errorf("the agent's token after the refusals: %d %q", code, msg)
	}
	if code := r.get(t, "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics answered %d", code)
	}
}

func TestTheAgentMayReadTheLeaseAndNothingMore(t *testing.T) {
	e := setup(t)
	lookup := e.agentLookup(t)
	e.startReplica(t, "vpcnet-budget-a")
	eventually(t, 20*time.Second, "the agent reads the leader from the Lease", func() error { _, err := lookup(t.Context()); return err })

	agent, err := kubernetes.NewForConfig(e.as(t, ns, "vpcnet"))
	if err != nil {
		t.Fatal(err)
	}
	leases := agent.CoordinationV1().Leases(ns)
	l, err := leases.Get(t.Context(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent cannot get the Lease: %v", err)
	}
	l.Spec.HolderIdentity = ptr("rogue 10.9.9.9:1")
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent updating the Lease: %v, want Forbidden", err)
	}
	if err := leases.Delete(t.Context(), leaseName, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent deleting the Lease: %v, want Forbidden", err)
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "vpcnet-budget-2", Namespace: ns}}
	if _, err := leases.Create(t.Context(), other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent creating a Lease: %v, want Forbidden", err)
	}
	if _, err := leases.Get(t.Context(), "kube-scheduler", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent reading another Lease: %v, want Forbidden", err)
	}
	if _, err := leases.List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent listing Leases: %v, want Forbidden", err)
	}

	// The controller, likewise, may touch its own Lease only.
	ctl, err := kubernetes.NewForConfig(e.as(t, ns, "vpcnet-budget"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.CoordinationV1().Leases(ns).Get(t.Context(), "kube-scheduler", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller reading another Lease: %v, want Forbidden", err)
	}
	if _, err := ctl.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller listing Secrets: %v, want Forbidden", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A join books tickets far ahead; the leader writes how far into its
// Lease at every renewal, and the next leader books new requests after
// that, where the last one would have put them, so the tickets' holders,
// coming back with their slots, find them free. Without the annotation
// the next leader granted a new request at once, ahead of them all.
func TestTheNextLeaderBooksAfterWhatTheLastOneHadBooked(t *testing.T) {
	e := setup(t)
	agentToken := e.as(t, ns, "vpcnet").BearerToken
	a := e.startReplica(t, "vpcnet-budget-a")
	eventually(t, 20*time.Second, "replica a grants", func() error {
		if code, msg := a.reserve(t, agentToken); code != http.StatusOK {
			return fmt.Errorf("answered %d %s", code, msg)
		}
		return nil
	})
	var last budgetapi.Answer
	for i := range 300 {
		code, msg := a.ask(t, agentToken, budget.Request{Node: fmt.Sprintf("ip-10-0-1-%d", i), Actions: []string{"CreateNetworkInterface"}, Urgent: true})
		if code != http.StatusOK || json.Unmarshal([]byte(msg), &last) != nil {
			t.Fatalf("ask %d: %d %s", i, code, msg)
		}
	}
	if last.Ticket == 0 || last.SlotMs < 30_000 {
		t.Fatalf("the 300th create: %+v; want a ticket at least 30 s ahead", last)
	}
	var promised time.Time
	eventually(t, 10*time.Second, "the Lease carries the schedule booked", func() error {
		l, err := e.admin.CoordinationV1().Leases(ns).Get(t.Context(), leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var booked map[string]time.Time
		if err := json.Unmarshal([]byte(l.Annotations[controller.BookedAnnotation]), &booked); err != nil {
			return fmt.Errorf("annotation %s=%q: %w", controller.BookedAnnotation, l.Annotations[controller.BookedAnnotation], err)
		}
		if promised = booked["CreateNetworkInterface"]; time.Until(promised) < 25*time.Second {
			return fmt.Errorf("CreateNetworkInterface booked until %v from now; want the 300 creates' schedule", time.Until(promised))
		}
		if n, err := strconv.ParseUint(l.Annotations[controller.LastTicketAnnotation], 10, 64); err != nil || n < last.Ticket {
			return fmt.Errorf("annotation %s=%q; want the last ticket handed out, at least the 300th create's %d", controller.LastTicketAnnotation, l.Annotations[controller.LastTicketAnnotation], last.Ticket)
		}
		return nil
	})
	b := e.startReplica(t, "vpcnet-budget-b")
	b.waitReady(t)
	a.stop(t)
	var next budgetapi.Answer
	eventually(t, 10*time.Second, "replica b answers", func() error {
		code, msg := b.ask(t, agentToken, budget.Request{Node: "ip-10-0-2-1", Actions: []string{"CreateNetworkInterface"}, Urgent: true})
		if code != http.StatusOK {
			return fmt.Errorf("answered %d %s", code, msg)
		}
		return json.Unmarshal([]byte(msg), &next)
	})
	// New requests go after the promise, less the burst the bucket may
	// run ahead (about 20 s at DefaultConfig's create bucket).
	if slot := time.Duration(next.SlotMs) * time.Millisecond; next.Ticket == 0 || time.Until(promised)-slot > 25*time.Second {
		t.Errorf("the next leader answered a new create %+v, the last leader had booked creates until %v from now; want it booked after them", next, time.Until(promised).Round(time.Millisecond))
	}
}
