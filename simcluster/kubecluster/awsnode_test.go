package kubecluster

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vpcnet/vpcnet/internal/kubetest"
)

const envAWSNode = "VPCNET_AWS_NODE_DIR"

// awsNodeManifest is aws-node's own manifest: from make aws-node-bins
// when it ran, else from its module (downloaded from the module proxy at
// the release tools/aws-node pins).
func awsNodeManifest(t *testing.T) []byte {
	t.Helper()
	if dir := os.Getenv(envAWSNode); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, AWSNodeManifest))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/aws/amazon-vpc-cni-k8s")
	cmd.Dir = "../../tools/aws-node"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("download aws-node's module: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(mod.Dir, "config", "master", "aws-k8s-cni.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLocalAWSNodeManifestChangesOnlyImagesEnvAndThePolicyAgent: the
// local cloud installs aws-node's own manifest; what differs is the two
// images, the EC2 endpoint and credentials added to the aws-node
// container, and the network policy agent (container and setting), which
// this machine cannot build. Every other object and field is as shipped.
func TestLocalAWSNodeManifestChangesOnlyImagesEnvAndThePolicyAgent(t *testing.T) {
	orig := awsNodeManifest(t)
	env := []string{"AWS_ENDPOINT_URL_EC2=http://127.0.0.1:8780", "AWS_ACCESS_KEY_ID=k"}
	local, err := LocalAWSNodeManifest(orig, env)
	if err != nil {
		t.Fatal(err)
	}
	before, err := kubetest.Decode(orig)
	if err != nil {
		t.Fatal(err)
	}
	after, err := kubetest.Decode(local)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(after) {
		t.Fatalf("%d objects, want %d", len(after), len(before))
	}
	spec := []string{"spec", "template", "spec"}
	for i := range before {
		b, a := before[i], after[i]
		if b.GetKind() != "DaemonSet" {
			if !reflect.DeepEqual(b.Object, a.Object) {
				t.Errorf("%s %s changed", b.GetKind(), b.GetName())
			}
			continue
		}
		inits, _, _ := unstructured.NestedSlice(a.Object, append(spec, "initContainers")...)
		if len(inits) != 1 || inits[0].(map[string]any)["image"] != AWSNodeInitImage {
			t.Errorf("init containers %v, want one with %s", inits, AWSNodeInitImage)
		}
		ctrs, _, _ := unstructured.NestedSlice(a.Object, append(spec, "containers")...)
		var names []string
		for _, c := range ctrs {
			names = append(names, c.(map[string]any)["name"].(string))
		}
		if !slices.Equal(names, []string{"aws-node"}) {
			t.Fatalf("containers %v, want only aws-node (the policy agent removed)", names)
		}
		ac := ctrs[0].(map[string]any)
		if ac["image"] != AWSNodeImage {
			t.Errorf("aws-node image %v", ac["image"])
		}
		origCtrs, _, _ := unstructured.NestedSlice(b.Object, append(spec, "containers")...)
		bc := origCtrs[0].(map[string]any)
		var wantEnv []any
		for _, e := range bc["env"].([]any) {
			if e.(map[string]any)["name"] != "NETWORK_POLICY_ENFORCING_MODE" {
				wantEnv = append(wantEnv, e)
			}
		}
		if len(wantEnv) != len(bc["env"].([]any))-1 {
			t.Errorf("the shipped manifest no longer sets NETWORK_POLICY_ENFORCING_MODE once: the recipe needs a look")
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			wantEnv = append(wantEnv, map[string]any{"name": k, "value": v})
		}
		if !reflect.DeepEqual(ac["env"], wantEnv) {
			t.Errorf("aws-node env:\n got %v\nwant %v", ac["env"], wantEnv)
		}
		// Everything else of the DaemonSet as shipped.
		for _, o := range []*unstructured.Unstructured{a, b} {
			_ = unstructured.SetNestedSlice(o.Object, nil, append(spec, "initContainers")...)
			_ = unstructured.SetNestedSlice(o.Object, nil, append(spec, "containers")...)
		}
		if !reflect.DeepEqual(a.Object, b.Object) {
			t.Errorf("DaemonSet %s changed beyond its containers", b.GetName())
		}
		delete(ac, "image")
		delete(bc, "image")
		ac["env"], bc["env"] = nil, nil
		if !reflect.DeepEqual(ac, bc) {
			t.Errorf("aws-node container changed beyond image and env:\n got %v\nwant %v", ac, bc)
		}
	}
}
