// Package faults shows runnerflow's promises under outages in the real test world: the GitHub
// double sends signed workflow_job webhooks to the starter's intake, the worker runs the pools
// and runners against a real Temporal server and kube-apiserver, the simulator plays kubelet
// and runner, and a test breaks one part for a while — the API server hangs, GitHub answers
// 5xx, no worker runs the pool. Each ends with every job run once, no runner more than jobs,
// nothing left behind (pods, Secrets, GitHub registrations, runner workflows), and no busy
// runner removed.
package faults

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

var world *testworld.World

const webhookSecret = "faults test secret"

func TestMain(m *testing.M) {
	os.Exit(testworld.RunTests(m, testworld.WorldOptions{WebhookSecret: webhookSecret}, &world))
}

// settleWait bounds each wait for the system to converge: generous, for a loaded 2-core
// machine (a bound, never a speed check).
const settleWait = 6 * time.Minute

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// system is runnerflow as in production for one test: a worker (which the test may stop and
// start again) and the starter's intake, which the world's GitHub double delivers to. Each
// test has its own organization at the double, namespace and pool.
type system struct {
	t    *testing.T
	c    client.Client
	org  string
	ns   string
	pool string

	intake     *webhook.Handler
	stopWorker func()
	// lastReconcile is the workflow id of the reconcile run triggerReconcile last waited for.
	lastReconcile string
	// kube, when set, is the worker's way to the API server (a fault-injecting proxy);
	// otherwise the world's API server itself.
	kube *rest.Config
	// deliveriesMayFail: the test breaks the intake's way to Temporal for a while, so GitHub's
	// deliveries in that time fail (GitHub does not send them again by itself); checkClean
	// then does not ask every delivery to be acknowledged, only every job to be run.
	deliveriesMayFail bool
}

func newSystem(t *testing.T, pool string) *system {
	t.Helper()
	return newSystemVia(t, pool, nil)
}

// newSystemVia is newSystem with the worker reaching the API server through kube (nil: the
// world's API server itself).
func newSystemVia(t *testing.T, pool string, kube *rest.Config) *system {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(quietLogger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := &system{t: t, c: c, org: "org-" + pool, ns: world.Kube.NewNamespace(t), pool: pool, kube: kube}
	if err := world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: s.org + "/app"}); err != nil {
		t.Fatal(err)
	}
	s.intake, err = webhook.NewHandler(webhook.Config{Secret: []byte(webhookSecret), Temporal: c, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.intake.Routes())
	t.Cleanup(srv.Close)
	world.GitHub.SetWebhookURL(srv.URL + "/webhook")
	world.GitHub.ResetCalls()
	s.startWorker()
	t.Cleanup(func() {
		if s.stopWorker != nil {
			s.stopWorker()
		}
	})
	return s
}

// startWorker runs the in-process worker, as the worker binary assembles it.
func (s *system) startWorker() {
	s.t.Helper()
	kube := world.Kube.Config
	if s.kube != nil {
		kube = s.kube
	}
	app, err := workerapp.New(workerapp.Config{
		TemporalAddress: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Kube: kube, WatchNamespace: s.ns,
		GitHub: activities.GitHubConfig{BaseURL: world.GitHub.URL(), Token: world.GitHubToken},
		Logger: quietLogger(), StopTimeout: 2 * time.Second,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	s.stopWorker = func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("worker: %v", err)
		}
		s.stopWorker = nil
	}
}

// apply starts the test's pool: ephemeral runners in the test's namespace and organization,
// with the pod annotations given (the simulator reads a job's duration there); change adjusts
// the spec.
func (s *system) apply(annotations map[string]string, change func(*workflows.PoolSpec)) {
	s.t.Helper()
	max := 20
	spec := workflows.PoolSpec{
		Name: s.pool, Organization: s.org, Labels: []string{"self-hosted", "linux"},
		MaxReplicas: &max, Namespace: s.ns,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.328.0"},
			}},
		},
	}
	if change != nil {
		change(&spec)
	}
	if _, err := poolcli.Apply(context.Background(), s.c, []workflows.PoolSpec{spec.WithDefaults()}); err != nil {
		s.t.Fatalf("apply: %v", err)
	}
	s.t.Cleanup(func() {
		_ = s.c.TerminateWorkflow(context.Background(), workflows.PoolWorkflowID(s.pool), "", "test over")
	})
	s.eventually("the pool routable by the intake", func() bool {
		if err := s.intake.Pools().Refresh(context.Background()); err != nil {
			s.t.Fatal(err)
		}
		return slices.ContainsFunc(s.intake.Pools().Pools(), func(p webhook.Pool) bool { return p.Name == s.pool })
	})
}

// workFor is the pod annotation that makes the simulator's jobs last d.
func workFor(d time.Duration) map[string]string {
	return map[string]string{simulator.AnnotationWorkDuration: d.String()}
}

func (s *system) queueJobs(n int) []int64 {
	s.t.Helper()
	var ids []int64
	for range n {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: s.org + "/app", Labels: []string{"self-hosted", "linux"}})
		if err != nil {
			s.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

func (s *system) status() workflows.PoolStatus {
	s.t.Helper()
	st, err := poolcli.Status(context.Background(), s.c, s.pool)
	if err != nil {
		s.t.Fatalf("status of %s: %v", s.pool, err)
	}
	return st
}

// count is how many of the jobs have the status at the double.
func count(jobs []int64, status string) int {
	n := 0
	for _, id := range jobs {
		if j, _ := world.GitHub.Job(id); j.Status == status {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds, failing the test after settleWait.
func (s *system) eventually(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(settleWait)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %s waiting for %s; pool: %s", settleWait, what, s.describe())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *system) describe() string {
	st, err := poolcli.Status(context.Background(), s.c, s.pool)
	if err != nil {
		return err.Error()
	}
	var runners []string
	for _, r := range st.Runners {
		runners = append(runners, r.Name+"/"+string(r.State))
	}
	return fmt.Sprintf("%d reservations, runners [%s], totals %+v, why %q", st.Reservations, strings.Join(runners, " "), st.Totals, st.Why)
}

// checkAllClean waits until the pool is at rest, then holds runnerflow to its promises: every
// job ran once, to success (a busy runner removed, or a pod deleted under its job, fails the
// job at GitHub), on one of the pool's runners; the pool started one runner per job and none
// failed; no runner workflow of the pool runs; no pod, Secret or GitHub registration of the
// pool is left; every event was acknowledged (its delivery, or a redelivery of it).
func (s *system) checkAllClean(jobs []int64) {
	s.t.Helper()
	s.checkClean(jobs, len(jobs), 0)
}

// checkClean is checkAllClean for a pool that started started runners, failed of them failed.
func (s *system) checkClean(jobs []int64, started, failed int) {
	s.t.Helper()
	s.eventually("every job completed", func() bool { return count(jobs, githubdouble.StatusCompleted) == len(jobs) })
	s.eventually("the pool at rest", func() bool {
		// A query may time out while the pool's workflow task is retried after a fault (the
		// Temporal server restarted, the worker killed): that is "not yet", not a failure.
		st, err := poolcli.Status(context.Background(), s.c, s.pool)
		if err != nil {
			s.t.Logf("status of %s: %v (asking again)", s.pool, err)
			return false
		}
		return len(st.Runners) == 0 && st.Reservations == 0
	})
	s.eventually("no runner workflow of the pool running", func() bool { return s.openRunners() == 0 })
	s.eventually("no pod or Secret left", func() bool { return s.leftInCluster() == "" })
	s.eventually("no GitHub registration of the pool left", func() bool { return len(s.registrations()) == 0 })

	ran := map[string]int{}
	for _, id := range jobs {
		j, _ := world.GitHub.Job(id)
		pool, ok := workflows.PoolFromRunnerName(j.RunnerName)
		if j.Conclusion != githubdouble.ConclusionSuccess || !ok || pool != s.pool {
			s.t.Errorf("job %d: %s/%s on runner %q; want it run to success on a runner of %s", id, j.Status, j.Conclusion, j.RunnerName, s.pool)
		}
		ran[j.RunnerName]++
	}
	for runner, n := range ran {
		if n > 1 {
			s.t.Errorf("ephemeral runner %s ran %d jobs", runner, n)
		}
	}
	st := s.status()
	if st.Totals.Started != int64(started) || st.Totals.Failed != int64(failed) {
		s.t.Errorf("pool totals %+v for %d jobs: want %d runners started, %d failed (finished: %+v)", st.Totals, len(jobs), started, failed, st.Finished)
	}
	// Every event was acknowledged: an attempt of its guid (the first, or a redelivery) answered 2xx.
	deliveries := world.GitHub.Deliveries()
	acked := map[string]bool{}
	for _, d := range deliveries {
		acked[d.ID] = acked[d.ID] || (d.StatusCode >= 200 && d.StatusCode <= 299)
	}
	for _, d := range deliveries {
		if !s.deliveriesMayFail && slices.Contains(jobs, d.JobID) && !acked[d.ID] {
			s.t.Errorf("delivery %s (%s, job %d) answered %d %s", d.ID, d.Action, d.JobID, d.StatusCode, d.Error)
		}
	}
}

// openRunners counts the pool's runner workflows still running.
func (s *system) openRunners() int {
	s.t.Helper()
	resp, err := s.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`WorkflowType = '%s' AND RunnerPool = '%s' AND ExecutionStatus = 'Running'`, workflows.RunnerWorkflowType, s.pool),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return len(resp.GetExecutions())
}

// leftInCluster names the pods and Secrets left in the test's namespace, "" when none.
func (s *system) leftInCluster() string {
	s.t.Helper()
	ctx := context.Background()
	pods, err := world.Kubernetes.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	secrets, err := world.Kubernetes.CoreV1().Secrets(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, "pod/"+p.Name)
	}
	for _, sec := range secrets.Items {
		left = append(left, "secret/"+sec.Name)
	}
	return strings.Join(left, " ")
}

// registrations lists the GitHub runners registered under the pool's names.
func (s *system) registrations() []string {
	var names []string
	for _, r := range world.GitHub.Runners() {
		if strings.HasPrefix(r.Name, s.pool+"-") {
			names = append(names, r.Name)
		}
	}
	return names
}
