package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vpcnet/vpcnet/agent"
)

const (
	zoneLabel = "topology.kubernetes.io/zone"
	eniAnno   = "k8s.amazonaws.com/eniConfig"
)

func TestTheNodesENIConfigIsChosenAsTheAmazonVPCCNIChoosesIt(t *testing.T) {
	all := []runtime.Object{
		eniConfig("us-west-2a", "subnet-zone", "sg-zone"),
		eniConfig("pods-big", "subnet-big", "sg-big1", "sg-big2"),
		eniConfig("default", "subnet-default"),
		eniConfig("broken", ""),
		eniConfig("typo", "subnt-1"),
	}
	tests := []struct {
		name       string
		node       *corev1.Node
		eniConfigs []runtime.Object
		// want: the ENIConfig's name, and either its subnet and groups
		// or words the problem must contain.
		wantName    string
		wantFrom    string
		wantSubnet  string
		wantGroups  []string
		wantProblem []string
	}{
		{
			name:     "the annotation beats the label",
			node:     newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a"), annotated(eniAnno, "pods-big")),
			wantName: "pods-big", wantFrom: "annotation " + eniAnno, wantSubnet: "subnet-big", wantGroups: []string{"sg-big1", "sg-big2"},
		},
		{
			// Issue 24: aws-node's out-of-band label is the source of
			// truth, above the annotation and the label.
			name: "the externalEniConfig label beats the annotation and the label",
			node: newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a"), annotated(eniAnno, "pods-big"),
				labeled("vpc.amazonaws.com/externalEniConfig", "default")),
			wantName: "default", wantFrom: "label vpc.amazonaws.com/externalEniConfig", wantSubnet: "subnet-default",
		},
		{
			name:     "the zone label names it by default",
			node:     newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a")),
			wantName: "us-west-2a", wantFrom: "label " + zoneLabel, wantSubnet: "subnet-zone", wantGroups: []string{"sg-zone"},
		},
		{
			name:     "neither: the ENIConfig named default, without groups (the primary ENI's apply)",
			node:     newNode("n", ourProviderID),
			wantName: "default", wantFrom: "the default", wantSubnet: "subnet-default",
		},
		{
			name:        "missing: not found, naming what was looked for and why",
			node:        newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2c")),
			wantName:    "us-west-2c",
			wantProblem: []string{"ENIConfig us-west-2c (named by label topology.kubernetes.io/zone) does not exist", "create it"},
		},
		{
			name:        "without a subnet",
			node:        newNode("n", ourProviderID, annotated(eniAnno, "broken")),
			wantName:    "broken",
			wantProblem: []string{"ENIConfig broken", "spec.subnet is empty"},
		},
		{
			name:        "with something that is not a subnet ID",
			node:        newNode("n", ourProviderID, annotated(eniAnno, "typo")),
			wantName:    "typo",
			wantProblem: []string{`spec.subnet "subnt-1" is not a subnet ID`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Options{NodeName: "n", CustomNetwork: true}, fake.NewClientset(tt.node), newDynamic(all...))
			st := h.waitFor(t, "read the ENIConfig", func(st agent.KubeState) bool {
				return st.ENIConfig.Found || strings.Contains(st.ENIConfig.Problem, "ENIConfig "+tt.wantName+" (") && !strings.Contains(st.ENIConfig.Problem, "waiting")
			}).ENIConfig
			if !st.Known {
				t.Errorf("ENIConfig %+v not marked known after the API server answered", st)
			}
			if st.Name != tt.wantName || !strings.HasPrefix(st.From, tt.wantFrom) {
				t.Errorf("ENIConfig %q from %q, want %q from %q", st.Name, st.From, tt.wantName, tt.wantFrom)
			}
			if len(tt.wantProblem) == 0 {
				if !st.Found || st.Subnet != tt.wantSubnet || !slices.Equal(st.SecurityGroups, tt.wantGroups) {
					t.Errorf("ENIConfig %+v, want found with subnet %s and groups %v", st, tt.wantSubnet, tt.wantGroups)
				}
				return
			}
			if st.Found {
				t.Errorf("ENIConfig %+v reported found", st)
			}
			for _, w := range tt.wantProblem {
				if !strings.Contains(st.Problem, w) {
					t.Errorf("problem %q does not say %q", st.Problem, w)
				}
			}
		})
	}
}

func TestAMissingENIConfigCRDIsNamed(t *testing.T) {
	dyn := newDynamic()
	dyn.PrependReactor("list", "eniconfigs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(ENIConfigResource.GroupResource(), "")
	})
	h := start(t, Options{NodeName: "n", CustomNetwork: true}, fake.NewClientset(newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a"))), dyn)
	st := h.waitFor(t, "reported the CRD missing", func(st agent.KubeState) bool {
		return strings.Contains(st.ENIConfig.Problem, "not installed")
	}).ENIConfig
	if st.Known || st.Found {
		t.Errorf("ENIConfig %+v marked known or found while it cannot be read", st)
	}
	for _, w := range []string{"ENIConfig us-west-2a", "eniconfigs.crd.k8s.amazonaws.com"} {
		if !strings.Contains(st.Problem, w) {
			t.Errorf("problem %q does not say %q", st.Problem, w)
		}
	}
}

// A found ENIConfig whose watch is refused is still used (it was read),
// but the status must say its edits go unseen: before, the refusal showed
// only in LastError when the list had synced first.
func TestAnENIConfigReadButNotWatchedSaysItsChangesAreNotFollowed(t *testing.T) {
	dyn := newDynamic(eniConfig("us-west-2a", "subnet-zone", "sg-zone"))
	dyn.PrependWatchReactor("eniconfigs", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(ENIConfigResource.GroupResource(), "", errors.New(`User "system:serviceaccount:kube-system:vpcnet" cannot watch resource "eniconfigs"`))
	})
	h := start(t, Options{NodeName: "n", CustomNetwork: true}, fake.NewClientset(newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a"))), dyn)
	st := h.waitFor(t, "reported the refused watch", func(st agent.KubeState) bool {
		return st.ENIConfig.Found && strings.Contains(st.LastError, "cannot watch")
	}).ENIConfig
	if st.Subnet != "subnet-zone" {
		t.Errorf("ENIConfig %+v: want the subnet it was read with kept", st)
	}
	for _, w := range []string{"ENIConfig us-west-2a", "not followed", `cannot watch resource "eniconfigs"`, "ClusterRole vpcnet"} {
		if !strings.Contains(st.Problem, w) {
			t.Errorf("problem %q does not say %q", st.Problem, w)
		}
	}
}

func TestENIConfigChangesAreFollowed(t *testing.T) {
	ctx := context.Background()
	node := newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a"))
	cs := fake.NewClientset(node)
	dyn := newDynamic(eniConfig("us-west-2a", "subnet-one", "sg-1"), eniConfig("special", "subnet-special"))
	h := start(t, Options{NodeName: "n", CustomNetwork: true}, cs, dyn)
	h.waitFor(t, "read the ENIConfig", func(st agent.KubeState) bool { return st.ENIConfig.Subnet == "subnet-one" })
	eni := dyn.Resource(ENIConfigResource)

	// The ENIConfig is edited.
	if _, err := eni.Update(ctx, eniConfig("us-west-2a", "subnet-two", "sg-2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := h.waitFor(t, "followed the edit", func(st agent.KubeState) bool { return st.ENIConfig.Subnet == "subnet-two" }).ENIConfig
	if !slices.Equal(st.SecurityGroups, []string{"sg-2"}) {
		t.Errorf("groups after the edit = %v, want [sg-2]", st.SecurityGroups)
	}

	// The Node is annotated with another ENIConfig.
	node.Annotations[eniAnno] = "special"
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "followed the annotation", func(st agent.KubeState) bool {
		return st.ENIConfig.Name == "special" && st.ENIConfig.Subnet == "subnet-special"
	})

	// The ENIConfig is deleted.
	if err := eni.Delete(ctx, "special", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st = h.waitFor(t, "noticed the deletion", func(st agent.KubeState) bool { return !st.ENIConfig.Found }).ENIConfig
	if !strings.Contains(st.Problem, "ENIConfig special (named by annotation k8s.amazonaws.com/eniConfig) does not exist") {
		t.Errorf("problem after deletion = %q", st.Problem)
	}
}

func TestWithoutCustomNetworkingNoENIConfigIsRead(t *testing.T) {
	dyn := newDynamic(eniConfig("us-west-2a", "subnet-one"))
	h := start(t, Options{NodeName: "n"}, fake.NewClientset(newNode("n", ourProviderID, labeled(zoneLabel, "us-west-2a")), newPod("a", "b", "n")), dyn)
	st := h.waitFor(t, "watched the pods", func(st agent.KubeState) bool { return st.Pods == 1 })
	if st.ENIConfig.Name != "" || len(dyn.Actions()) != 0 {
		t.Errorf("ENIConfig %+v read with custom networking off (%d requests)", st.ENIConfig, len(dyn.Actions()))
	}
}
