package simulator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// kube is the API server shared by the package's tests; each test has its own namespace,
// double and simulator.
var kube *testworld.Kube

func TestMain(m *testing.M) {
	os.Exit(runWithKube(m))
}

func runWithKube(m *testing.M) int {
	dir, err := os.MkdirTemp("", "simulator-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kube, err = testworld.StartKube(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube:", err)
		return 1
	}
	defer kube.Stop()
	return m.Run()
}

const (
	apiToken = "ghp_simulatortest00000000000000000000000"
	org      = "acme"
	repo     = "acme/app"
	// waitTimeout bounds every condition wait; generous for a loaded 2-core machine.
	waitTimeout = 60 * time.Second
)

// world is one test's namespace, GitHub double and running simulator.
type world struct {
	t      *testing.T
	ns     string
	client kubernetes.Interface
	gh     *githubdouble.Server
	api    *github.Client // the real go-github client, pointed at the double
	sim    *simulator.Simulator
	// stopSim stops sim and waits for its Run to return.
	stopSim func()
}

func newWorld(t *testing.T) *world {
	t.Helper()
	client, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{apiToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: repo, OwnerType: "Organization"}); err != nil {
		t.Fatal(err)
	}
	url := gh.URL()
	api, err := github.NewClient(github.WithAuthToken(apiToken), github.WithURLs(&url, &url))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ns: kube.NewNamespace(t), client: client, gh: gh, api: api}
	w.sim = simulator.New(simulator.Config{
		Client: client, Namespaces: []string{w.ns}, GitHub: githubdouble.NewRunnerClient(url),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	w.stopSim = w.startSimulator(w.sim)
	return w
}

// startSimulator runs sim until the test ends (or the returned stop is called) and checks
// that Run returns cleanly.
func (w *world) startSimulator(sim *simulator.Simulator) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("simulator Run: %v", err)
		}
	}
	w.t.Cleanup(stop)
	return stop
}

// jitSecretPod creates a JIT runner at the double through go-github, a Secret with its config
// and a runner pod using it, as runnerflow's activities do.
func (w *world) jitSecretPod(name string, labels []string, annotations map[string]string) *corev1.Pod {
	w.t.Helper()
	req := githubJITRequest(name)
	req.Labels = labels
	cfg, _, err := w.api.Actions.CreateOrgJITConfig(w.t.Context(), org, req)
	if err != nil {
		w.t.Fatalf("CreateOrgJITConfig: %v", err)
	}
	w.createSecret(name, runnerpod.SecretKeyJITConfig, cfg.GetEncodedJITConfig())
	return w.createPod(name, annotations, []corev1.EnvVar{secretEnv(runnerpod.EnvJITConfig, name, runnerpod.SecretKeyJITConfig)})
}

// tokenSecretPod creates a registration token through go-github, a Secret with it and a
// registration-token runner pod.
func (w *world) tokenSecretPod(name string, labels string, ephemeral bool) *corev1.Pod {
	w.t.Helper()
	tok, _, err := w.api.Actions.CreateOrganizationRegistrationToken(w.t.Context(), org)
	if err != nil {
		w.t.Fatalf("CreateOrganizationRegistrationToken: %v", err)
	}
	w.createSecret(name, runnerpod.SecretKeyRegistrationToken, tok.GetToken())
	return w.createPod(name, map[string]string{simulator.AnnotationWorkDuration: "100ms"}, []corev1.EnvVar{
		secretEnv(runnerpod.EnvRegistrationToken, name, runnerpod.SecretKeyRegistrationToken),
		{Name: runnerpod.EnvRunnerName, Value: name},
		{Name: runnerpod.EnvRunnerLabels, Value: labels},
		{Name: runnerpod.EnvRunnerGroup, Value: "Default"},
		{Name: runnerpod.EnvRunnerEphemeral, Value: fmt.Sprint(ephemeral)},
	})
}

func (w *world) createSecret(name, key, value string) {
	w.t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue}},
		Data:       map[string][]byte{key: []byte(value)},
	}
	if _, err := w.client.CoreV1().Secrets(w.ns).Create(w.t.Context(), secret, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("create secret: %v", err)
	}
}

func secretEnv(env, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

func (w *world) createPod(name string, annotations map[string]string, env []corev1.EnvVar) *corev1.Pod {
	w.t.Helper()
	if annotations == nil {
		annotations = map[string]string{simulator.AnnotationWorkDuration: "100ms"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Annotations: annotations,
			Labels: map[string]string{runnerpod.LabelManagedBy: runnerpod.ManagedByValue, runnerpod.LabelRunner: name},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:latest", Env: env}},
		},
	}
	created, err := w.client.CoreV1().Pods(w.ns).Create(w.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create pod: %v", err)
	}
	return created
}

func (w *world) queueJob(labels ...string) githubdouble.Job {
	w.t.Helper()
	j, err := w.gh.QueueJob(githubdouble.JobSpec{Repository: repo, Labels: labels})
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

// waitPod waits until the pod satisfies cond and returns it; it fails the test at the deadline
// with the pod's last state.
func (w *world) waitPod(name, want string, cond func(*corev1.Pod) bool) *corev1.Pod {
	w.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(w.t.Context(), 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := w.client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pod
		return cond(pod), nil
	})
	if err != nil {
		w.t.Fatalf("pod %s never became %s: %v; last status: %+v", name, want, err, statusOf(last))
	}
	return last
}

func statusOf(pod *corev1.Pod) any {
	if pod == nil {
		return nil
	}
	return pod.Status
}

func phaseIs(p corev1.PodPhase) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool { return pod.Status.Phase == p }
}

// waitPodGone waits until the API server no longer has the pod.
func (w *world) waitPodGone(name string) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.t.Context(), 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := w.client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		w.t.Fatalf("pod %s never went away: %v", name, err)
	}
}

// waitFor waits until cond holds.
func (w *world) waitFor(what string, cond func() bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.t.Context(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// runner returns the double's runner with that name.
func (w *world) runner(name string) (githubdouble.Runner, bool) {
	for _, r := range w.gh.Runners() {
		if r.Name == name {
			return r, true
		}
	}
	return githubdouble.Runner{}, false
}

func (w *world) runnerOnline(name string) bool {
	r, ok := w.runner(name)
	return ok && r.Status == "online"
}

func (w *world) jobCompleted(id int64) (githubdouble.Job, bool) {
	j, ok := w.gh.Job(id)
	return j, ok && j.Status == githubdouble.StatusCompleted
}

// connectCalls counts the runner-protocol calls that bring a runner online.
func (w *world) connectCalls() int {
	n := 0
	for k, v := range w.gh.RunnerProtocolCalls() {
		if strings.HasSuffix(k.Route, "/_runner/jit/connect") || strings.HasSuffix(k.Route, "/_runner/connect") {
			n += v
		}
	}
	return n
}

// recordPhases watches one pod from before its creation. The returned function collects the
// phases it goes through, in order and without repeats, until it reaches final. A watch
// delivers every change, so a brief Running is seen however fast the runner finishes.
func (w *world) recordPhases(name string) func(final corev1.PodPhase) []corev1.PodPhase {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), waitTimeout)
	watcher, err := w.client.CoreV1().Pods(w.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		cancel()
		w.t.Fatal(err)
	}
	return func(final corev1.PodPhase) []corev1.PodPhase {
		defer cancel()
		defer watcher.Stop()
		var out []corev1.PodPhase
		for ev := range watcher.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if p := pod.Status.Phase; len(out) == 0 || out[len(out)-1] != p {
				out = append(out, p)
			}
			if pod.Status.Phase == final {
				break
			}
		}
		return out
	}
}

// waitStats waits until the simulator's counters satisfy cond. Counters move right after the
// API write they count, so a test that saw the write waits a moment for the count.
func (w *world) waitStats(want string, cond func(simulator.Stats) bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.t.Context(), 10*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return cond(w.sim.Stats()), nil
	})
	if err != nil {
		w.t.Fatalf("stats %+v never showed %s: %v", w.sim.Stats(), want, err)
	}
}
