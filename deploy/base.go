// Package deploy holds runnerflow's Kubernetes manifests (a kustomize base: `kubectl apply -k
// deploy/`), the example pools, the Grafana dashboard and the Docker Compose support files. The
// Go code renders the base with kustomize's own API, as `kustomize build deploy/` does, and
// applies objects with server-side apply, so tests install exactly what a cluster gets.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Names the base gives its objects; tests and the demo address them by these.
const (
	// Namespace holds the worker, the starter and the runner pods.
	Namespace = "runnerflow"
	// WarmNamespace is the worker's --warm-namespace: warm registrations' Secrets wait there,
	// apart from the runner pods, and nothing else is there.
	WarmNamespace = "runnerflow-warm"
	// WarmRole is the worker's Role (and RoleBinding) in WarmNamespace: Secrets only.
	WarmRole = "runnerflow-worker-warm"
	// WorkerServiceAccount is the worker's identity, bound to the namespaced Role of the same name.
	WorkerServiceAccount = "runnerflow-worker"
	// StarterServiceAccount is the starter's identity; it is bound to nothing.
	StarterServiceAccount = "runnerflow-starter"
	// RunnerServiceAccount is the runner pods' identity; it is bound to nothing and mounts no
	// token (docs/security.md).
	RunnerServiceAccount = "runnerflow-runner"
)

// baseFiles are the base's manifests, embedded so callers need no working directory.
//
//go:embed *.yaml
var baseFiles embed.FS

// Base returns the objects of the kustomize base in this folder, as `kustomize build deploy/`
// renders them and in its order.
func Base() ([]*unstructured.Unstructured, error) {
	return Render(baseFiles)
}

// root is where Render places a kustomization in kustomize's in-memory file system.
const root = "/kustomization"

// Render runs kustomize (its krusty API, with the options `kustomize build` uses by default)
// on the kustomization at the root of fsys and returns the objects it renders.
func Render(fsys fs.FS) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join(root, name), data)
	})
	if err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	// `kustomize build` without --reorder: the kustomization's sortOptions, else legacy order
	// (namespaces first).
	opts.Reorder = krusty.ReorderOptionUnspecified
	resources, err := krusty.MakeKustomizer(opts).Run(mem, root)
	if err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	objs := make([]*unstructured.Unstructured, 0, resources.Size())
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize: %s: %w", r.CurId(), err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}
