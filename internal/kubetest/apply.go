package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of Apply.
const FieldManager = "vpcnet-kubetest"

// crdWait bounds the wait for an applied CRD to be Established and for its
// kinds to appear in discovery; kindWait bounds the wait for a kind when no
// CRD was just applied, so a misspelt kind fails quickly.
const (
	crdWait  = 30 * time.Second
	kindWait = 3 * time.Second
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Apply applies every object in manifests (multi-document YAML or JSON, as
// `kubectl apply -f` takes) by server-side apply as the admin, forcing
// conflicts. Namespaces and CRDs go first, then the rest in document order;
// after each CRD it waits until the CRD is Established and its kinds are
// served, so custom resources can follow it in the same manifests.
// Namespaced objects with no namespace go to "default".
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	return Apply(ctx, c.AdminConfig(), manifests)
}

// Apply is Cluster.Apply as the user cfg authenticates: with a service
// account's config it shows whether that account may apply the objects.
func Apply(ctx context.Context, cfg *rest.Config, manifests []byte) error {
	objs, err := Decode(manifests)
	if err != nil {
		return err
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return applyRank(a) - applyRank(b)
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	patience := kindWait
	for _, obj := range objs {
		what := describe(obj)
		mapping, err := restMapping(ctx, mapper, obj.GroupVersionKind(), patience)
		if err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		if mapping.Resource == crdResource {
			if err := waitEstablished(ctx, dyn, obj.GetName()); err != nil {
				return err
			}
			mapper.ResetWithContext(ctx)
			patience = crdWait
		}
	}
	return nil
}

// Decode splits multi-document YAML or JSON into objects, dropping empty
// documents and expanding Lists. Each object must have apiVersion, kind and
// metadata.name.
func Decode(manifests []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", doc, err)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		items := []*unstructured.Unstructured{obj}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("manifest document %d: %w", doc, err)
			}
			items = items[:0]
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		}
		for _, item := range items {
			if item.GetAPIVersion() == "" || item.GetKind() == "" || item.GetName() == "" {
				return nil, fmt.Errorf("manifest document %d: object %s lacks apiVersion, kind or metadata.name", doc, describe(item))
			}
			objs = append(objs, item)
		}
	}
}

// applyRank orders objects that others depend on first.
func applyRank(obj *unstructured.Unstructured) int {
	switch obj.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Namespace"}:
		return 0
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 1
	default:
		return 2
	}
}

func describe(obj *unstructured.Unstructured) string {
	s := obj.GetAPIVersion() + " " + obj.GetKind() + " "
	if ns := obj.GetNamespace(); ns != "" {
		s += ns + "/"
	}
	return s + obj.GetName()
}

// restMapping finds the resource for gvk. A kind missing from discovery
// may be a CRD applied a moment ago whose API is not served yet, so it
// re-reads discovery for up to patience before giving up.
func restMapping(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, gvk schema.GroupVersionKind, patience time.Duration) (*meta.RESTMapping, error) {
	deadline := time.Now().Add(patience)
	for {
		mapping, err := mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
			return mapping, nil
		case !meta.IsNoMatchError(err):
			return nil, fmt.Errorf("map %s to a resource: %w", gvk, err)
		case time.Now().After(deadline):
			return nil, fmt.Errorf("the server does not serve %s (is its CRD applied?): %w", gvk, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("map %s to a resource: %w", gvk, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		mapper.ResetWithContext(ctx)
	}
}

// waitEstablished waits until the named CRD's Established condition is
// True: only then does the apiserver serve its resources.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	var conditions []any
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdWait, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ = unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			cond, _ := c.(map[string]any)
			if cond["type"] == "Established" && cond["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not Established within %v (conditions %v): %w", name, crdWait, conditions, err)
	}
	return nil
}
