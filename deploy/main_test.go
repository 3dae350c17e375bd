package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// The API server is started by the first test that needs it and shared by the package; the
// Compose and dashboard tests never start it.
var (
	kubeOnce sync.Once
	kube     *testworld.Kube
	kubeDir  string
	kubeErr  error

	baseOnce    sync.Once
	baseApplied []*unstructured.Unstructured
	baseErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if kube != nil {
		if err := kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop kube:", err)
		}
	}
	for _, dir := range []string{kubeDir, binDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// startKube returns the package's API server, starting it on first use.
func startKube(t *testing.T) *testworld.Kube {
	t.Helper()
	kubeOnce.Do(func() {
		kubeDir, kubeErr = os.MkdirTemp("", "deploy-kube-")
		if kubeErr != nil {
			return
		}
		kube, kubeErr = testworld.StartKube(context.Background(), kubeDir)
	})
	if kubeErr != nil {
		t.Fatalf("start kube-apiserver: %v", kubeErr)
	}
	return kube
}

// applyBase applies the rendered base once, as an administrator would, and returns the objects
// as the API server stored them. Tests that check permissions need the Role and binding in place.
func applyBase(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	k := startKube(t)
	baseOnce.Do(func() {
		objs, err := deploy.Base()
		if err != nil {
			baseErr = err
			return
		}
		a, err := deploy.NewApplier(k.Config)
		if err != nil {
			baseErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		baseApplied, baseErr = a.Apply(ctx, objs, deploy.ApplyOptions{})
	})
	if baseErr != nil {
		t.Fatalf("apply the base: %v", baseErr)
	}
	return baseApplied
}

// decode splits a YAML stream into objects, skipping empty documents; a document that is not
// an object with a name fails the test.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
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
