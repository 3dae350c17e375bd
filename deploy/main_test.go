package deploy_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
