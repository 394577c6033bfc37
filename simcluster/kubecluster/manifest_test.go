package kubecluster

import (
	"os"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// TestLocalManifestChangesOnlyImageAndEnv: the local cloud installs
// deploy/vpcnet.yaml as an operator would; the only differences are the
// image of every vpcnet container and the agent's added settings.
func TestLocalManifestChangesOnlyImageAndEnv(t *testing.T) {
	orig, err := os.ReadFile("../../deploy/vpcnet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"VPCNET_EC2_ENDPOINT=http://127.0.0.1:8780", "AWS_ACCESS_KEY_ID=k"}
	local, err := LocalManifest(orig, env)
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
	for i := range before {
		b, a := before[i], after[i]
		if b.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(a.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				if c.(map[string]any)["image"] != VpcnetImage {
					t.Errorf("Deployment %s: image %v", a.GetName(), c.(map[string]any)["image"])
				}
				delete(c.(map[string]any), "image")
			}
			_ = unstructured.SetNestedSlice(a.Object, containers, "spec", "template", "spec", "containers")
			containers, _, _ = unstructured.NestedSlice(b.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				delete(c.(map[string]any), "image")
			}
			_ = unstructured.SetNestedSlice(b.Object, containers, "spec", "template", "spec", "containers")
		}
		if b.GetKind() != "DaemonSet" {
			if !reflect.DeepEqual(b.Object, a.Object) {
				t.Errorf("%s %s changed", b.GetKind(), b.GetName())
			}
			continue
		}
		var added []string
		for _, field := range []string{"initContainers", "containers"} {
			bl, _, _ := unstructured.NestedSlice(b.Object, "spec", "template", "spec", field)
			al, _, _ := unstructured.NestedSlice(a.Object, "spec", "template", "spec", field)
			for j := range al {
				ac, bc := al[j].(map[string]any), bl[j].(map[string]any)
				if ac["image"] != VpcnetImage {
					t.Errorf("%s %v: image %v", field, ac["name"], ac["image"])
				}
				ae, _ := ac["env"].([]any)
				be, _ := bc["env"].([]any)
				for _, e := range ae[len(be):] {
					m := e.(map[string]any)
					added = append(added, m["name"].(string)+"="+m["value"].(string))
				}
				delete(ac, "image")
				delete(bc, "image")
				ac["env"], bc["env"] = nil, nil
			}
			// Everything else as shipped, compared below.
			_ = unstructured.SetNestedSlice(a.Object, al, "spec", "template", "spec", field)
			_ = unstructured.SetNestedSlice(b.Object, bl, "spec", "template", "spec", field)
		}
		if !reflect.DeepEqual(added, env) {
			t.Errorf("added env %v, want %v", added, env)
		}
		if !reflect.DeepEqual(b.Object, a.Object) {
			t.Errorf("DaemonSet changed beyond its containers' image and env")
		}
	}
}

// Side by side on one cluster, each CNI's DaemonSet keeps to its own
// nodes; nothing else in the manifest changes, and a selector the
// manifest already had (kubernetes.io/os) is kept.
func TestSelectNodesKeepsOnlyTheNamedDaemonSetToItsNodes(t *testing.T) {
	orig, err := os.ReadFile("../../deploy/vpcnet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	local, err := LocalManifest(orig, nil)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := selectNodes(local, "vpcnet", map[string]string{"cni.example/group": "vpcnet"})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := kubetest.Decode(local)
	after, err := kubetest.Decode(pinned)
	if err != nil || len(after) != len(before) {
		t.Fatalf("%d objects (%v), want %d", len(after), err, len(before))
	}
	for i := range before {
		b, a := before[i], after[i]
		if b.GetKind() != "DaemonSet" || b.GetName() != "vpcnet" {
			if !reflect.DeepEqual(a.Object, b.Object) {
				t.Errorf("%s %s changed", b.GetKind(), b.GetName())
			}
			continue
		}
		was, _, _ := unstructured.NestedStringMap(b.Object, "spec", "template", "spec", "nodeSelector")
		sel, _, _ := unstructured.NestedStringMap(a.Object, "spec", "template", "spec", "nodeSelector")
		if sel["cni.example/group"] != "vpcnet" || len(sel) != len(was)+1 {
			t.Errorf("nodeSelector %v, want %v plus cni.example/group=vpcnet", sel, was)
		}
		for k, v := range was {
			if sel[k] != v {
				t.Errorf("nodeSelector lost %s=%s: %v", k, v, sel)
			}
		}
		unstructured.RemoveNestedField(a.Object, "spec", "template", "spec", "nodeSelector")
		unstructured.RemoveNestedField(b.Object, "spec", "template", "spec", "nodeSelector")
		if !reflect.DeepEqual(a.Object, b.Object) {
			t.Errorf("DaemonSet vpcnet changed beyond its nodeSelector")
		}
	}
}
