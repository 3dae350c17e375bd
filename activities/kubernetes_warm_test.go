package activities

import (
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// A warm registration's Secret goes to the worker's warm namespace, never the runner's; the
// runner that takes it copies it into its own namespace and its pod is owned by the copy; the
// spent warm Secrets go in one request that touches nothing else.
func TestWarmRegistrationIsKeptApartUntilItsRunnerStarts(t *testing.T) {
	e := newEnv(t)
	warmNS := testKube.NewNamespace(t)
	gha := &GitHubActivities{GitHub: e.api, Kube: e.kube, WarmNamespace: warmNS}
	in := e.registration("pool-a-ab12-w1")
	in.Warm = true
	out, err := gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.SecretNamespace != warmNS || out.SecretName != in.Name {
		t.Fatalf("output %+v, want the Secret %s in the warm namespace %s", out, in.Name, warmNS)
	}
	raw, _ := json.Marshal(out)
	e.mustNotLeak("the activity result", string(raw))
	if n := e.runnerSecrets(e.ns); len(n) != 0 {
		t.Fatalf("the runner namespace holds %v before any runner started, want nothing", n)
	}

	pod := e.podInput(in.Name)
	pod.SecretName, pod.SecretUID = in.Name, ""
	start := workflows.StartWarmRunnerInput{Pod: pod, Warm: workflows.SecretRef{Namespace: warmNS, Name: in.Name}}
	started, err := e.k8s.StartWarmRunner(e.ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warm, err := e.kube.CoreV1().Secrets(warmNS).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(own.Data[runnerpod.SecretKeyJITConfig]) != string(warm.Data[runnerpod.SecretKeyJITConfig]) ||
		own.Annotations[runnerpod.AnnotationWorkflowID] != in.WorkflowID || string(own.UID) != started.SecretUID {
		t.Errorf("the runner's Secret %v is not the warm registration's copy for %s", own.Annotations, in.WorkflowID)
	}
	created, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := created.OwnerReferences; len(o) != 1 || o[0].Kind != "Secret" || string(o[0].UID) != started.SecretUID || string(created.UID) != started.Pod.UID {
		t.Errorf("pod owners %+v, want the runner's own Secret %s", o, started.SecretUID)
	}
	again, err := e.k8s.StartWarmRunner(e.ctx, start)
	if err != nil || again.SecretUID != started.SecretUID || again.Pod.UID != started.Pod.UID || !again.Pod.Adopted {
		t.Fatalf("retry = %+v, %v; want the copy and the pod adopted", again, err)
	}

	other := e.registration("pool-a-ab12-w2")
	other.Warm = true
	if _, err := gha.RegisterRunner(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	spent := workflows.DeleteWarmSecretsInput{Namespace: warmNS, Pool: "pool-a", Names: []string{in.Name, "pool-a-ab12-gone"}}
	if _, err := e.k8s.DeleteWarmSecrets(e.ctx, spent); err != nil {
		t.Fatal(err)
	}
	if left := e.runnerSecrets(warmNS); !slices.Equal(left, []string{other.Name}) {
		t.Errorf("warm namespace holds %v after the spent one went, want only %s", left, other.Name)
	}
	if left := e.runnerSecrets(e.ns); !slices.Equal(left, []string{in.Name}) {
		t.Errorf("runner namespace holds %v, want the runner's own %s untouched", left, in.Name)
	}
}

// A runner whose warm Secret is gone, or names another workflow, fails for good and writes
// nothing in its namespace.
func TestStartWarmRunnerRefusesAMissingOrForeignWarmSecret(t *testing.T) {
	e := newEnv(t)
	warmNS := testKube.NewNamespace(t)
	gha := &GitHubActivities{GitHub: e.api, Kube: e.kube, WarmNamespace: warmNS}
	in := e.registration("pool-a-ab12-w3")
	in.Warm = true
	if _, err := gha.RegisterRunner(e.ctx, in); err != nil {
		t.Fatal(err)
	}
	pod := e.podInput("pool-a-ab12-w4") // another runner's workflow
	_, err := e.k8s.StartWarmRunner(e.ctx, workflows.StartWarmRunnerInput{Pod: pod, Warm: workflows.SecretRef{Namespace: warmNS, Name: in.Name}})
	if errType(err) != workflows.ErrNotOwned {
		t.Errorf("foreign warm Secret: %v, want %s", err, workflows.ErrNotOwned)
	}
	_, err = e.k8s.StartWarmRunner(e.ctx, workflows.StartWarmRunnerInput{Pod: pod, Warm: workflows.SecretRef{Namespace: warmNS, Name: "pool-a-ab12-w4"}})
	if errType(err) != workflows.ErrNotFound {
		t.Errorf("missing warm Secret: %v, want %s", err, workflows.ErrNotFound)
	}
	if left := e.runnerSecrets(e.ns); len(left) != 0 {
		t.Errorf("runner namespace holds %v, want nothing", left)
	}
}

// runnerSecrets names runnerflow's Secrets in ns, sorted.
func (e *env) runnerSecrets(ns string) []string {
	e.t.Helper()
	list, err := e.kube.CoreV1().Secrets(ns).List(e.ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelManagedBy + "=" + runnerpod.ManagedByValue})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// With the worker's cache of the warm namespace, a warm start reads its warm Secret from the
// cache, not the API server (so a burst spends the client's rate limit on writes); a cached
// entry it cannot trust (another owner) is checked at the API server.
func TestStartWarmRunnerReadsItsWarmSecretFromTheCache(t *testing.T) {
	e := newEnv(t)
	warmNS := testKube.NewNamespace(t)
	gha := &GitHubActivities{GitHub: e.api, Kube: e.kube, WarmNamespace: warmNS}
	mint := func(name string) *corev1.Secret {
		in := e.registration(name)
		in.Warm = true
		if _, err := gha.RegisterRunner(e.ctx, in); err != nil {
			t.Fatal(err)
		}
		s, err := e.kube.CoreV1().Secrets(warmNS).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	k8s := &KubernetesActivities{Client: e.kube, WarmSecrets: corelisters.NewSecretLister(indexer)}

	cached := mint("pool-a-ab12-c1")
	if err := indexer.Add(cached); err != nil {
		t.Fatal(err)
	}
	// Gone at the API server, still in the cache: only a start that reads the cache succeeds.
	if err := e.kube.CoreV1().Secrets(warmNS).Delete(e.ctx, cached.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := e.podInput(cached.Name)
	if _, err := k8s.StartWarmRunner(e.ctx, workflows.StartWarmRunnerInput{Pod: pod, Warm: workflows.SecretRef{Namespace: warmNS, Name: cached.Name}}); err != nil {
		t.Fatalf("start from the cached warm Secret: %v", err)
	}

	// The cache says another workflow owns it; the API server, which holds the truth, says ours.
	stale := mint("pool-a-ab12-c2")
	foreign := stale.DeepCopy()
	foreign.Annotations[runnerpod.AnnotationWorkflowID] = "runner/someone-else"
	if err := indexer.Add(foreign); err != nil {
		t.Fatal(err)
	}
	if _, err := k8s.StartWarmRunner(e.ctx, workflows.StartWarmRunnerInput{Pod: e.podInput(stale.Name), Warm: workflows.SecretRef{Namespace: warmNS, Name: stale.Name}}); err != nil {
		t.Fatalf("start whose cached entry names another owner: %v, want the API server's answer (ours)", err)
	}

	// Not in the cache yet (minted a moment ago): read from the API server.
	fresh := mint("pool-a-ab12-c3")
	if _, err := k8s.StartWarmRunner(e.ctx, workflows.StartWarmRunnerInput{Pod: e.podInput(fresh.Name), Warm: workflows.SecretRef{Namespace: warmNS, Name: fresh.Name}}); err != nil {
		t.Fatalf("start from a warm Secret the cache does not hold: %v", err)
	}
	if left := e.runnerSecrets(e.ns); !slices.Equal(left, []string{cached.Name, stale.Name, fresh.Name}) {
		t.Errorf("runner namespace holds %v, want the three runners' own copies", left)
	}
}
