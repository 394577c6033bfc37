package integration

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/kube"
)

// customNetworking is the setting that turns on ENIConfigs; the label and
// annotation keep their defaults (ENI_CONFIG_LABEL_DEF,
// ENI_CONFIG_ANNOTATION_DEF).
var customNetworking = map[string]string{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true"}

func TestTheNodesENIConfigIsTheAnnotatedOneElseTheOneNamedByItsZoneLabel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// The Node's zone label and ENIConfig annotation ("" for none);
		// both ENIConfigs exist.
		zone, annotation string
		wantName         string // "zone" or "annotated"
		wantFrom         string
		wantSubnet       string
		wantGroups       []string
	}{
		{
			name: "the annotation beats the label", zone: "zone", annotation: "annotated",
			wantName: "annotated", wantFrom: "annotation " + eniAnno, wantSubnet: "subnet-0big", wantGroups: []string{"sg-0big1", "sg-0big2"},
		},
		{
			name: "by default the zone label names it", zone: "zone",
			wantName: "zone", wantFrom: "label " + zoneLabel, wantSubnet: "subnet-0zone", wantGroups: []string{"sg-0zone"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			inst := e.instance()
			me := e.name("ip-10-0-0-5")
			e.eniConfig(t, e.name("zone"), "subnet-0zone", "sg-0zone")
			e.eniConfig(t, e.name("annotated"), "subnet-0big", "sg-0big1", "sg-0big2")
			mods := []func(*corev1.Node){labeled(zoneLabel, e.name(tt.zone))}
			if tt.annotation != "" {
				mods = append(mods, annotated(eniAnno, e.name(tt.annotation)))
			}
			e.node(t, me, providerID(inst), mods...)
			l := startLayer(t, e.agentConfig(t), inst, with(customNetworking, "MY_NODE_NAME", me), nil)
			st := l.waitFor(t, "read the ENIConfig", func(st agent.KubeState) bool { return st.ENIConfig.Known }).ENIConfig
			if st.Name != e.name(tt.wantName) || st.From != tt.wantFrom {
				t.Errorf("ENIConfig %q named by %q, want %q by %q", st.Name, st.From, e.name(tt.wantName), tt.wantFrom)
			}
			if !st.Found || st.Subnet != tt.wantSubnet || !slices.Equal(st.SecurityGroups, tt.wantGroups) || st.Problem != "" {
				t.Errorf("ENIConfig %+v, want found with subnet %s and groups %v", st, tt.wantSubnet, tt.wantGroups)
			}
		})
	}
}

func TestAMissingENIConfigIsNamedUntilItIsCreated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	inst := e.instance()
	me := e.name("ip-10-0-0-5")
	zone := e.name("us-west-2c")
	e.node(t, me, providerID(inst), labeled(zoneLabel, zone))
	l := startLayer(t, e.agentConfig(t), inst, with(customNetworking, "MY_NODE_NAME", me), nil)

	st := l.waitFor(t, "read that the ENIConfig is missing", func(st agent.KubeState) bool { return st.ENIConfig.Known }).ENIConfig
	want := "ENIConfig " + zone + " (named by label " + zoneLabel + ") does not exist"
	if st.Found || !strings.Contains(st.Problem, want) || !strings.Contains(st.Problem, "create it") {
		t.Fatalf("ENIConfig %+v, want not found with a problem saying %q and what to do", st, want)
	}

	// The operator creates it; the watch picks it up.
	e.eniConfig(t, zone, "subnet-0late", "sg-0late")
	st = l.waitFor(t, "picked up the new ENIConfig", func(st agent.KubeState) bool { return st.ENIConfig.Found }).ENIConfig
	if st.Name != zone || st.Subnet != "subnet-0late" || !slices.Equal(st.SecurityGroups, []string{"sg-0late"}) || st.Problem != "" {
		t.Errorf("ENIConfig %+v, want %s with subnet-0late and sg-0late", st, zone)
	}
}

func TestTheENIConfigCRDRejectsAnENIConfigWithoutASubnet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := e.dyn.Resource(kube.ENIConfigResource).Create(t.Context(), eniConfigObject(e.name("nosubnet"), ""), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.subnet") {
		t.Fatalf("create an ENIConfig without spec.subnet: %v, want it rejected as invalid naming spec.subnet", err)
	}
}

// with returns settings plus one more.
func with(settings map[string]string, k, v string) map[string]string {
	out := maps.Clone(settings)
	out[k] = v
	return out
}
