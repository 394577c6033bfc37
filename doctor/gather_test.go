package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vpcnet/vpcnet/introspect"
)

type fakeAgent struct {
	st  introspect.Status
	err error
	// pol is /v1/policy; polErr, when set, is what an agent without it
	// answers.
	pol    introspect.PolicyStatus
	polErr error
}

func (a fakeAgent) Status(context.Context) (introspect.Status, error) { return a.st, a.err }
func (a fakeAgent) Policy(context.Context, string) (introspect.PolicyStatus, error) {
	return a.pol, a.polErr
}
func (a fakeAgent) Config(context.Context) ([]introspect.Setting, error) {
	return []introspect.Setting{{Name: "CLUSTER_NAME", Value: "from-agent"}, {Name: "VPCNET_STARTUP_TAINT", Value: "t"}}, a.err
}

type fakeMetadata struct {
	m   IMDSFacts
	err error
}

func (f fakeMetadata) Metadata(context.Context) (IMDSFacts, error) { return f.m, f.err }

type fakeCloud struct {
	got *CloudQuery
	e   EC2Facts
}

func (f fakeCloud) Cloud(_ context.Context, q CloudQuery) (EC2Facts, error) {
	*f.got = q
	return f.e, nil
}

var (
	_ Agent    = fakeAgent{}
	_ Metadata = fakeMetadata{}
	_ Cloud    = fakeCloud{}
	_ Agent    = &introspect.Client{}
)

// With nothing reachable, doctor still answers and names each source it
// could not read.
func TestGatherWithNothingReachableNamesEverySource(t *testing.T) {
	down := &introspect.UnreachableError{URL: "http://127.0.0.1:61679/v1/status", Err: errors.New("connection refused")}
	f := Gather(t.Context(), Readers{
		Agent:          fakeAgent{err: down},
		CheckpointPath: filepath.Join(t.TempDir(), "checkpoint.json"),
		Metadata:       fakeMetadata{err: errors.New("IMDS instance-id: timeout")},
		Cloud:          fakeCloud{got: new(CloudQuery)},
	})
	read := map[string]bool{}
	for _, s := range f.Sources {
		read[s.Name] = s.OK
	}
	for _, name := range []string{SourceAgent, SourceHost, SourceCNI, SourceIMDS, SourceEC2, SourceKube} {
		ok, seen := read[name]
		if !seen || ok {
			t.Errorf("source %s: seen %t, read %t; want listed as not read (sources %+v)", name, seen, ok, f.Sources)
		}
	}
	if !read[SourceCheckpoint] || f.Checkpoint == nil || !f.Checkpoint.Missing {
		t.Errorf("a missing checkpoint is a fact, not a failure: %+v", f.Checkpoint)
	}
	r := Diagnose(f)
	if !slices.ContainsFunc(r.Findings, func(x Finding) bool { return x.ID == "agent-unreachable" }) {
		t.Errorf("no agent-unreachable finding: %+v", r.Findings)
	}
}

// EC2 is asked about the instance IMDS names, in IMDS's Region, for the
// cluster the agent is configured with.
func TestGatherAsksEC2AboutTheInstanceIMDSNames(t *testing.T) {
	var q CloudQuery
	f := Gather(t.Context(), Readers{
		Agent:       fakeAgent{st: introspect.Status{InstanceID: "i-agent", InstanceType: "m5.large"}},
		Metadata:    fakeMetadata{m: IMDSFacts{InstanceID: "i-imds", Region: "eu-west-1", InstanceType: "m5.large"}},
		Cloud:       fakeCloud{got: &q, e: EC2Facts{InstanceID: "i-imds"}},
		ClusterName: "from-flag",
	})
	if q.InstanceID != "i-imds" || q.Region != "eu-west-1" || q.ClusterName != "from-agent" || q.InstanceType != "m5.large" {
		t.Errorf("EC2 query %+v", q)
	}
	if f.StartupTaint != "t" {
		t.Errorf("startup taint %q, want the agent's", f.StartupTaint)
	}
}

// A corrupt checkpoint is reported and left exactly as it is: doctor
// never writes on the node (disk.Load would copy it aside).
func TestCorruptCheckpointIsReportedAndNotTouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	if err := os.WriteFile(path, []byte(`{"version":"vpcnet/1","assignments":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := Gather(t.Context(), Readers{CheckpointPath: path})
	if f.Checkpoint == nil || f.Checkpoint.Corrupt == "" {
		t.Fatalf("checkpoint %+v, want corrupt", f.Checkpoint)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("doctor wrote beside the checkpoint: %v", ents)
	}
}

// CNI STATUS runs the installed plugin as the runtime would; a plugin
// that says "not ready" is a finding with its words.
func TestCNIStatusRunsTheInstalledPlugin(t *testing.T) {
	conf, bin := t.TempDir(), t.TempDir()
	write := func(path, data string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(conf, "10-vpcnet.conflist"), `{"cniVersion":"1.1.0","name":"aws-cni","plugins":[{"type":"vpcnet"}]}`, 0o644)
	write(filepath.Join(bin, "vpcnet"), `#!/bin/sh
if [ "$CNI_COMMAND" = STATUS ]; then
  echo '{"cniVersion":"1.1.0","code":50,"msg":"vpcnetd is not ready: host networking"}'
  exit 1
fi
echo '{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}'
`, 0o755)
	c, err := CNIReader{ConfDir: conf, BinDir: bin}.CNI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Ours != "10-vpcnet.conflist" || !c.StatusRan || !strings.Contains(c.StatusErr, "vpcnetd is not ready") {
		t.Fatalf("CNI facts %+v", c)
	}

	write(filepath.Join(bin, "vpcnet"), "#!/bin/sh\nexit 0\n", 0o755)
	c, err = CNIReader{ConfDir: conf, BinDir: bin}.CNI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !c.StatusRan || c.StatusErr != "" {
		t.Errorf("a plugin that answers STATUS with success: %+v", c)
	}
}

// An agent left out on purpose is reported as skipped, not as down.
func TestSkippedAgentIsNoFinding(t *testing.T) {
	f := Gather(t.Context(), Readers{Skipped: map[string]bool{SourceAgent: true}})
	if r := Diagnose(f); len(r.Findings) != 0 {
		t.Errorf("findings with the agent skipped: %+v", r.Findings)
	}
	if f.Sources[0].Detail != "not read: skipped" {
		t.Errorf("agent source %+v", f.Sources[0])
	}
}

// The agent's NetworkPolicy status is a fact doctor reads; an agent too
// old to serve it is still read for everything else.
func TestGatherReadsTheAgentsNetworkPolicyStatus(t *testing.T) {
	f := Gather(t.Context(), Readers{Agent: fakeAgent{pol: introspect.PolicyStatus{Enabled: true, Mode: "strict", Synced: true, Policies: 4}}})
	if f.Agent == nil || f.Agent.Policy == nil || f.Agent.Policy.Mode != "strict" || f.Agent.Policy.Policies != 4 {
		t.Fatalf("agent facts %+v, want its /v1/policy", f.Agent)
	}

	old := errors.New("GET http://127.0.0.1:61679/v1/policy: 404 Not Found: 404 page not found")
	f = Gather(t.Context(), Readers{Agent: fakeAgent{st: introspect.Status{Ready: true}, polErr: old}})
	if f.Agent == nil || f.Agent.Policy != nil {
		t.Fatalf("agent facts %+v, want the status and no policy", f.Agent)
	}
	if s := f.Sources[0]; !s.OK || !strings.Contains(s.Detail, "NetworkPolicy status unread: GET http://127.0.0.1:61679/v1/policy: 404") {
		t.Errorf("agent source %+v, want read, naming the unread policy status", s)
	}
}

// Doctor counts the cluster's NetworkPolicies in every namespace; a list
// the API server refuses is named in the source's detail, not fatal.
func TestKubeReaderCountsNetworkPoliciesInEveryNamespace(t *testing.T) {
	np := func(ns, name string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	cs := fake.NewClientset(np("a", "deny"), np("a", "web"), np("b", "deny"))
	k, err := KubeReader{Client: cs}.Kube(t.Context(), KubeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if k.NetworkPolicies == nil || *k.NetworkPolicies != 3 {
		t.Errorf("NetworkPolicies = %v, want 3", k.NetworkPolicies)
	}

	cs = fake.NewClientset()
	cs.PrependReactor("list", "networkpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "", errors.New("RBAC: access denied"))
	})
	f := Gather(t.Context(), Readers{Kube: KubeReader{Client: cs}})
	if f.Kube == nil || f.Kube.NetworkPolicies != nil {
		t.Fatalf("kube facts %+v, want read with no count", f.Kube)
	}
	i := slices.IndexFunc(f.Sources, func(s Source) bool { return s.Name == SourceKube })
	if s := f.Sources[i]; !s.OK || !strings.Contains(s.Detail, "partly: list NetworkPolicies:") || !strings.Contains(s.Detail, "forbidden") {
		t.Errorf("kubernetes source %+v, want read, naming the refused list", s)
	}
}
