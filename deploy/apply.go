package deploy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of objects applied by Apply.
const FieldManager = "runnerflow-deploy"

// ApplyOptions are the knobs of Apply; the zero value applies for real.
type ApplyOptions struct {
	// DryRun asks the API server to validate and admit every object without storing it.
	DryRun bool
}

// Applier applies manifests to one cluster with server-side apply, as `kubectl apply
// --server-side` does: the API server validates every object in full and reports every field
// it does not know.
type Applier struct {
	client dynamic.Interface
	mapper meta.RESTMapper
}

// NewApplier builds an Applier for the cluster cfg points at. Kinds are resolved through
// discovery, so objects of any API group the server serves can be applied.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return &Applier{client: client, mapper: mapper}, nil
}

// Apply applies objs in order (namespaces first, as the base lists them) and returns the
// objects as the API server stored them. It stops at the first error, naming the object.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		got, err := a.applyOne(ctx, obj, opts)
		if err != nil {
			return out, fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		out = append(out, got)
	}
	return out, nil
}

func (a *Applier) applyOne(ctx context.Context, obj *unstructured.Unstructured, opts ApplyOptions) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	var res dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return nil, fmt.Errorf("a namespaced %s needs metadata.namespace", gvk.Kind)
		}
		res = a.client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	} else if obj.GetNamespace() != "" {
		return nil, fmt.Errorf("%s is cluster-scoped but sets metadata.namespace %q", gvk.Kind, obj.GetNamespace())
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	po := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true), FieldValidation: metav1.FieldValidationStrict}
	if opts.DryRun {
		po.DryRun = []string{metav1.DryRunAll}
	}
	return res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, po)
}

func ptr[T any](v T) *T { return &v }
