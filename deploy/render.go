// Package deploy holds runnerflow's Kubernetes manifests (a kustomize base: `kubectl apply -k
// deploy/`), the example pools, the Grafana dashboard and the Docker Compose support files. The
// Go code renders the base the way kustomize would for the fields the base uses, and applies
// objects with server-side apply, so tests and the demo install exactly what a cluster gets.
package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Names the base gives its objects; tests and the demo address them by these.
const (
	// Namespace holds the worker, the starter and the runner pods.
	Namespace = "runnerflow"
	// WorkerServiceAccount is the worker's identity, bound to the namespaced Role of the same name.
	WorkerServiceAccount = "runnerflow-worker"
	// StarterServiceAccount is the starter's identity; it is bound to nothing.
	StarterServiceAccount = "runnerflow-starter"
)

// baseFiles are the base's manifests, embedded so the demo and tests need no working directory.
//
//go:embed *.yaml
var baseFiles embed.FS

// Base returns the objects of the kustomize base in this folder, in kustomization order.
func Base() ([]*unstructured.Unstructured, error) {
	return Render(baseFiles)
}

// kustomization is the subset of kustomize's Kustomization the loader understands. It is decoded
// strictly: a field kustomize would act on but this loader ignores would make the rendered
// objects differ from `kubectl apply -k`, so an unknown field is an error instead.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// Render reads kustomization.yaml at the root of fsys and returns the objects of every file it
// lists as resources, in order.
func Render(fsys fs.FS) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(fsys, "kustomization.yaml")
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w (the loader understands apiVersion, kind and resources only)", err)
	}
	if k.Kind != "Kustomization" || !strings.HasPrefix(k.APIVersion, "kustomize.config.k8s.io/") {
		return nil, fmt.Errorf("kustomization.yaml: kind %q, apiVersion %q: want a kustomize.config.k8s.io Kustomization", k.Kind, k.APIVersion)
	}
	var objs []*unstructured.Unstructured
	for _, res := range k.Resources {
		if !fs.ValidPath(res) || path.Dir(res) != "." || path.Ext(res) != ".yaml" {
			return nil, fmt.Errorf("kustomization.yaml: resource %q: the loader reads .yaml files in the same folder only", res)
		}
		data, err := fs.ReadFile(fsys, res)
		if err != nil {
			return nil, err
		}
		more, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", res, err)
		}
		objs = append(objs, more...)
	}
	return objs, nil
}

// Decode splits a YAML stream into objects. Empty documents are skipped; a document without
// apiVersion, kind or metadata.name, or with a duplicate key, is an error naming its position.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("document %d (%s): metadata.name is required", i, obj.GetKind())
		}
		objs = append(objs, obj)
	}
}
