package deploy_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/workflows"
)

// The worker's Roles are exactly what its code uses, for the kustomize base and for the Helm
// chart alike, in the runner namespace and in the warm one: every activity the worker
// registers with a Kubernetes client, and the pod watcher, run as the worker's ServiceAccount
// through the paths that reach each of their Kubernetes calls (create and adopt, a second
// registration rewriting the Secret, a warm registration minted, taken and removed, reconcile's
// listings, ...), while a recording transport notes what RBAC calls each request and where.
// The pod watcher runs as the worker runs it, elected through its Lease, and releases the Lease
// when stopped. No request is refused (the Roles suffice), no request goes to a third
// namespace, and in each namespace the Role grants nothing that was not requested there
// (nothing more). The proof is drawn from the code as it is: a call added to or dropped from an
// activity shows up here.
func TestWorkerRoleIsExactlyWhatItsCodeUses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		install func(t *testing.T) workerInstall
	}{
		{"kustomize", func(t *testing.T) workerInstall {
			applyBase(t)
			return workerInstall{ns: deploy.Namespace, warmNS: deploy.WarmNamespace, sa: deploy.WorkerServiceAccount}
		}},
		{"helm", func(t *testing.T) workerInstall {
			ns := startKube(t).NewNamespace(t)
			applyChart(t, "runnerflow", ns, "")
			return workerInstall{ns: ns, warmNS: ns + "-warm", sa: "runnerflow-worker"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.install(t)
			rec := exerciseWorker(t, in)
			if refused := rec.list("", true); len(refused) > 0 {
				t.Errorf("the API server refused the worker %v", refused)
			}
			if others := rec.namespaces(); !slices.Equal(others, slices.Sorted(slices.Values([]string{in.ns, in.warmNS}))) {
				t.Errorf("the worker's requests went to namespaces %v, want %s and %s only", others, in.ns, in.warmNS)
			}
			for _, ns := range []string{in.ns, in.warmNS} {
				used := rec.list(ns, false)
				granted := grants(t, serviceAccountClientIn(t, in.ns, in.sa), ns)
				if !slices.Equal(used, granted) {
					t.Errorf("in %s the worker's Role grants\n  %v\nthe worker's code uses\n  %v\ngranted, never used: %v\nused, not granted: %v",
						ns, granted, used, without(granted, used), without(used, granted))
				}
			}
		})
	}
}

// workerInstall is where an install put the worker: its namespace (the runners'), its warm
// namespace, and its ServiceAccount.
type workerInstall struct{ ns, warmNS, sa string }

func without(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(s string) bool { return slices.Contains(b, s) })
}

// kubeRequests records what RBAC calls each request a client makes, in which namespace
// ("group/resource verb", core group written as "", subresource after a slash) and whether the
// API server answered it with Forbidden. Discovery and /version are not recorded: every
// identity may read them.
type kubeRequests struct {
	mu   sync.Mutex
	seen map[nsRequest]bool // request → refused
}

// nsRequest is one kind of request in one namespace ("" for cluster-wide).
type nsRequest struct{ ns, key string }

func (k *kubeRequests) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if ns, key, ok := rbacRequest(req); ok {
				r := nsRequest{ns, key}
				k.mu.Lock()
				k.seen[r] = k.seen[r] || (resp != nil && resp.StatusCode == http.StatusForbidden)
				k.mu.Unlock()
			}
			return resp, err
		})
	})
	return out
}

// list returns the requests recorded in ns, sorted: the refused ones, or all of them. An
// empty ns lists every namespace's, each as "namespace: request".
func (k *kubeRequests) list(ns string, refusedOnly bool) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for r, refused := range k.seen {
		switch {
		case refusedOnly && !refused:
		case ns == "":
			out = append(out, r.ns+": "+r.key)
		case r.ns == ns:
			out = append(out, r.key)
		}
	}
	slices.Sort(out)
	return out
}

// namespaces are the namespaces requests went to, sorted ("" for cluster-wide ones).
func (k *kubeRequests) namespaces() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for r := range k.seen {
		out = append(out, r.ns)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (k *kubeRequests) has(ns, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	refused, ok := k.seen[nsRequest{ns, key}]
	return ok && !refused
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// rbacRequest names a request as the API server's authorizer sees it: the namespace from the
// path, the verb from the method (a GET is get with a name, watch with ?watch, list otherwise;
// a DELETE without a name is deletecollection) and the group and resource from the path.
func rbacRequest(req *http.Request) (ns, key string, ok bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	res, name := parts[0], ""
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		res += "/" + parts[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[req.Method]
	switch {
	case req.Method == http.MethodGet && name != "":
		verb = "get"
	case req.Method == http.MethodGet && (req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"):
		verb = "watch"
	case req.Method == http.MethodGet:
		verb = "list"
	case verb == "delete" && name == "":
		verb = "deletecollection"
	}
	return ns, group + "/" + res + " " + verb, verb != ""
}

// activityNames passes registrations on and keeps the names registered.
type activityNames struct {
	worker.ActivityRegistry
	names []string
}

func (r *activityNames) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	r.names = append(r.names, o.Name)
	r.ActivityRegistry.RegisterActivityWithOptions(a, o)
}

// exerciseWorker runs, as the install's worker ServiceAccount, every activity of the three activity sets
// the worker builds with its Kubernetes client (internal/workerapp: the Kubernetes, slot claim
// and GitHub activities, the last against the GitHub double), each through Temporal's activity
// test environment under its registered name, and the pod watcher until it watches. It fails
// if an activity fails or one registered activity was not run.
func exerciseWorker(t *testing.T, in workerInstall) *kubeRequests {
	t.Helper()
	rec := &kubeRequests{seen: map[nsRequest]bool{}}
	ns, sa := in.ns, in.sa
	client, err := kubernetes.NewForConfig(rec.wrap(serviceAccountConfig(t, ns, sa)))
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	reg := &activityNames{ActivityRegistry: env}
	// The worker keeps a cache of the warm namespace's Secrets (its list and watch), from which
	// a warm start reads.
	warm := activities.NewWarmSecretCache(client, in.warmNS)
	ctx, stop := context.WithCancel(context.Background())
	cached := make(chan struct{})
	go func() { warm.Run(ctx); close(cached) }()
	defer func() { stop(); <-cached }()
	synced, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !warm.WaitForSync(synced) {
		t.Fatal("the warm Secrets' cache never synced")
	}
	(&activities.KubernetesActivities{Client: client, WarmSecrets: warm.Lister()}).Register(reg)
	(&activities.SlotClaimActivities{Client: client}).Register(reg)
	gh := startGitHub(t, client)
	gh.WarmNamespace = in.warmNS // as the install's --warm-namespace says
	gh.Register(reg)
	ran := map[string]bool{}
	run := func(name string, in, out any) {
		t.Helper()
		v, err := env.ExecuteActivity(name, in)
		if err != nil {
			t.Fatalf("%s as %s: %v", name, sa, err)
		}
		if out != nil {
			if err := v.Get(out); err != nil {
				t.Fatal(err)
			}
		}
		ran[name] = true
	}
	runRunnerLifecycle(t, ns, run)
	runWarmRunner(t, in, run)
	watchPods(t, ns, client, rec)
	if want := slices.Sorted(slices.Values(reg.names)); !slices.Equal(slices.Sorted(maps.Keys(ran)), want) {
		t.Errorf("ran activities %v; the worker registers %v with its Kubernetes client", slices.Sorted(maps.Keys(ran)), want)
	}
	return rec
}

// runRunnerLifecycle is one runner's life through the activities, with the second attempts
// that take the other branches: registration (Secret created), GitHub reads, the registration
// removed and made again (the Secret rewritten), the slot's claim created and adopted, the pod
// created and adopted, the Secret handed to the pod, the pod read, both deleted.
func runRunnerLifecycle(t *testing.T, ns string, run func(name string, in, out any)) {
	t.Helper()
	scope := workflows.Scope{Repository: "my-org/my-repo"}
	name := workflows.RunnerName("rbac", "abcd", 1)
	wfID := workflows.RunnerWorkflowID("rbac", name)
	reg := workflows.RegisterRunnerInput{Pool: "rbac", Name: name, WorkflowID: wfID, Namespace: ns, Scope: scope,
		Labels: []string{"self-hosted"}, Mode: workflows.RegistrationJIT}
	var first, second workflows.RegisterRunnerOutput
	run(workflows.ActivityRegisterRunner, reg, &first)
	run(workflows.ActivityGetRunner, workflows.RunnerRef{Scope: scope, RunnerID: first.RunnerID}, nil)
	run(workflows.ActivityListRunners, workflows.ListRunnersInput{Scope: scope, NamePrefix: "rbac-"}, nil)
	run(workflows.ActivityPullJobs, workflows.PullJobsInput{Pool: "rbac", Labels: []string{"self-hosted"}, Repos: []string{scope.Repository}}, nil)
	run(workflows.ActivityReadJobs, workflows.ReadJobsInput{Pool: "rbac", Jobs: []workflows.JobRef{{ID: 1, Repository: scope.Repository}}}, nil)
	// A file the repository does not hold is an answer (no graph), not a failure; it touches no
	// Kubernetes object either way.
	run(workflows.ActivityReadRunGraph, workflows.ReadRunGraphInput{Repository: scope.Repository,
		HeadSHA: "0123456789abcdef0123456789abcdef01234567", Path: ".github/workflows/ci.yml"}, nil)
	run(workflows.ActivityRemoveRunner, workflows.RunnerRef{Scope: scope, RunnerID: first.RunnerID}, nil)
	run(workflows.ActivityRegisterRunner, reg, &second)
	if second.Adopted || second.RunnerID == first.RunnerID {
		t.Fatalf("the second registration %+v did not mint a new runner into the existing Secret", second)
	}
	claim := corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	claims := workflows.EnsureSlotClaimsInput{Pool: "rbac", Namespace: ns,
		Claims: []workflows.SlotClaim{{Name: workflows.SlotClaimName("rbac", "cache", 0), Template: claim}}}
	run(workflows.ActivityEnsureSlotClaims, claims, nil)
	run(workflows.ActivityEnsureSlotClaims, claims, nil)
	pod := workflows.CreateRunnerPodInput{Pool: "rbac", Name: name, WorkflowID: wfID, Namespace: ns, TemplateHash: "rbac",
		SecretName: name, Mode: workflows.RegistrationJIT, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:2.328.0"}}}}}
	var created, adopted workflows.CreateRunnerPodOutput
	run(workflows.ActivityCreateRunnerPod, pod, &created)
	run(workflows.ActivityCreateRunnerPod, pod, &adopted)
	if !adopted.Adopted {
		t.Fatalf("the second CreateRunnerPod %+v did not adopt the pod", adopted)
	}
	ref := workflows.PodRef{Namespace: ns, Name: name, UID: created.UID}
	run(workflows.ActivitySetSecretOwner, workflows.SetSecretOwnerInput{Namespace: ns, SecretName: name, PodName: name, PodUID: created.UID}, nil)
	run(workflows.ActivityGetRunnerPod, ref, nil)
	run(workflows.ActivityListRunnerObjects, workflows.ListRunnerObjectsInput{Namespace: ns}, nil)
	run(workflows.ActivityDeleteRunnerPod, ref, nil)
	run(workflows.ActivityDeleteRunnerSecret, workflows.SecretRef{Namespace: ns, Name: name}, nil)
}

// runWarmRunner is a warm registration's life: minted into the warm namespace, made again
// into the same Secret once GitHub lost it, its runner started from it in the runner
// namespace, the taken Secret deleted with others in one request; and reconcile's look at the
// warm namespace (its Secrets listed, one deleted by name, already gone).
func runWarmRunner(t *testing.T, in workerInstall, run func(name string, in, out any)) {
	t.Helper()
	ns := in.ns
	scope := workflows.Scope{Repository: "my-org/my-repo"}
	name := workflows.RunnerName("rbac", "abcd", 2)
	wfID := workflows.RunnerWorkflowID("rbac", name)
	reg := workflows.RegisterRunnerInput{Pool: "rbac", Name: name, WorkflowID: wfID, Namespace: ns,
		Scope: scope, Labels: []string{"self-hosted"}, Mode: workflows.RegistrationJIT, Warm: true}
	var warm, again workflows.RegisterRunnerOutput
	run(workflows.ActivityRegisterRunner, reg, &warm)
	if warm.SecretNamespace != in.warmNS {
		t.Fatalf("warm registration %+v, want its Secret in %s", warm, in.warmNS)
	}
	run(workflows.ActivityRemoveRunner, workflows.RunnerRef{Scope: scope, RunnerID: warm.RunnerID}, nil)
	run(workflows.ActivityRegisterRunner, reg, &again)
	if again.Adopted || again.RunnerID == warm.RunnerID || again.SecretNamespace != in.warmNS {
		t.Fatalf("the second warm registration %+v did not mint a new runner into the warm Secret", again)
	}
	pod := workflows.CreateRunnerPodInput{Pool: "rbac", Name: name, WorkflowID: wfID, Namespace: ns, TemplateHash: "rbac",
		SecretName: name, Mode: workflows.RegistrationJIT, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:2.328.0"}}}}}
	run(workflows.ActivityStartWarmRunner, workflows.StartWarmRunnerInput{Pod: pod, Warm: workflows.SecretRef{Namespace: in.warmNS, Name: name}}, nil)
	// A pod-first runner's copy, written once its pod is scheduled (here over the one above).
	run(workflows.ActivityCopyWarmSecret, workflows.CopyWarmSecretInput{Secret: workflows.SecretRef{Namespace: ns, Name: name},
		Pool: "rbac", WorkflowID: wfID, Warm: workflows.SecretRef{Namespace: in.warmNS, Name: name}}, nil)
	run(workflows.ActivityDeleteWarmSecrets, workflows.DeleteWarmSecretsInput{Namespace: in.warmNS, Pool: "rbac", Names: []string{name}}, nil)
	run(workflows.ActivityListRunnerObjects, workflows.ListRunnerObjectsInput{Namespace: in.warmNS, Kinds: []workflows.OrphanKind{workflows.KindSecret}}, nil)
	run(workflows.ActivityDeleteRunnerSecret, workflows.SecretRef{Namespace: in.warmNS, Name: name}, nil)
}

// noSignals is a Temporal client that takes every signal.
type noSignals struct{}

func (noSignals) SignalWorkflow(context.Context, string, string, string, any) error { return nil }

// watchPods runs the worker's pod watcher on ns as the worker runs it, elected through its
// Lease in ns, until it leads and watches; then stops it, which releases the Lease.
func watchPods(t *testing.T, ns string, client kubernetes.Interface, rec *kubeRequests) {
	t.Helper()
	w, err := activities.NewPodWatcher(activities.PodWatcherConfig{Client: client, Temporal: noSignals{}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	elected, err := activities.NewElectedPodWatcher(w, activities.PodWatcherLease{Client: client, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- elected.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !rec.has(ns, "/pods watch") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("pod watcher: %v", err)
	}
	if !rec.has(ns, "/pods watch") {
		t.Errorf("the pod watcher did not get to watch pods in %s; requests: %v", ns, rec.list("", false))
	}
	if !rec.has(ns, "coordination.k8s.io/leases update") {
		t.Errorf("the pod watcher did not release its Lease in %s; requests: %v", ns, rec.list("", false))
	}
}
