// Package pools tests the pool workflow end to end in the real test world: a real
// Temporal server, a real kube-apiserver, the GitHub double through go-github, the runner
// simulator, and the worker as workerapp assembles it, with the real runner workflow and
// activities. Pools are applied with `starter apply`'s code and operated with the real
// `temporal` CLI.
package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

var world *testworld.World

// offeringOrg is the organization whose scale sets the double offers jobs to, as GHES does;
// every other set is assigned its jobs, as on github.com. nameOnlyOrg's sets keep only their
// name as their label, as GHES without custom scale-set labels does.
const (
	offeringOrg = "org-ss-offers"
	nameOnlyOrg = "org-ss-name-only"
)

func TestMain(m *testing.M) {
	testworld.ShortenRestWaits()
	os.Exit(testworld.RunTests(m, testworld.WorldOptions{
		WorkDuration:              time.Second,
		ScaleSetJobOffersFor:      githubdouble.JobOffersFor(githubdouble.ScaleSetKey{Scope: githubdouble.OrgScope(offeringOrg)}),
		ScaleSetNameOnlyLabelsFor: githubdouble.ScaleSetsMatching(githubdouble.ScaleSetKey{Scope: githubdouble.OrgScope(nameOnlyOrg)}),
	}, &world))
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// poolTest is one test's pool: an organization at the double, a namespace, a worker watching
// it, and a Temporal client.
type poolTest struct {
	t    *testing.T
	ctx  context.Context
	name string
	org  string
	ns   string
	// warmNS is the worker's warm namespace when the test set one.
	warmNS string
	c      client.Client
	// stopWorker stops the worker the test started with.
	stopWorker func()
}

func newPoolTest(t *testing.T, name string) *poolTest {
	t.Helper()
	return newPoolTestWith(t, name, nil)
}

// newPoolTestWith is newPoolTest with configure's changes to the worker's configuration.
func newPoolTestWith(t *testing.T, name string, configure func(*workerapp.Config)) *poolTest {
	t.Helper()
	p := &poolTest{t: t, ctx: context.Background(), name: name, org: "org-" + name, ns: world.Kube.NewNamespace(t)}
	if err := world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: p.org + "/app"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(quietLogger())})
	if err != nil {
		t.Fatal(err)
	}
	p.c = c
	p.stopWorker = p.startWorkerWith(configure)
	// The worker and client go last: the pool is terminated first, so no later test's worker
	// picks up this pool's tasks.
	t.Cleanup(c.Close)
	t.Cleanup(p.terminate)
	return p
}

// startWorkerWith starts the test's worker with configure's changes to its configuration, and
// returns what stops it (also run at the test's end; stopping twice is stopping once).
func (p *poolTest) startWorkerWith(configure func(*workerapp.Config)) (stop func()) {
	cfg := workerapp.Config{
		TemporalAddress: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Kube: world.Kube.Config, WatchNamespace: p.ns,
		GitHub: activities.GitHubConfig{BaseURL: world.GitHub.URL(), Token: world.GitHubToken},
		Logger: quietLogger(),
	}
	if configure != nil {
		configure(&cfg)
	}
	app, err := workerapp.New(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				p.t.Errorf("worker: %v", err)
			}
		})
	}
	p.t.Cleanup(stop)
	return stop
}

// terminate ends the pool workflow and any runner workflow of it still running.
func (p *poolTest) terminate() {
	_ = p.c.TerminateWorkflow(p.ctx, workflows.PoolWorkflowID(p.name), "", "test over")
	resp, err := p.c.ListWorkflow(p.ctx, listRequest(fmt.Sprintf(`RunnerPool = %q AND ExecutionStatus = "Running"`, p.name)))
	if err != nil {
		return
	}
	for _, e := range resp.GetExecutions() {
		_ = p.c.TerminateWorkflow(p.ctx, e.GetExecution().GetWorkflowId(), "", "test over")
	}
}

// spec is the test's pool: organization scope, the simulator's job duration on the pods.
func (p *poolTest) spec(minR, maxR int, workDuration string) workflows.PoolSpec {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"},
	}}}
	if workDuration != "" {
		tmpl.Annotations = map[string]string{simulator.AnnotationWorkDuration: workDuration}
	}
	return workflows.PoolSpec{
		Name: p.name, Organization: p.org, Labels: []string{"self-hosted", "linux"},
		MinReplicas: minR, MaxReplicas: &maxR, Namespace: p.ns, Template: tmpl,
		ScaleDownDelay: &metav1.Duration{Duration: time.Second},
	}.WithDefaults()
}

func (p *poolTest) apply(spec workflows.PoolSpec) poolcli.ApplyResult {
	p.t.Helper()
	res, err := poolcli.Apply(p.ctx, p.c, []workflows.PoolSpec{spec})
	if err != nil {
		p.t.Fatalf("apply: %v", err)
	}
	return res[0]
}

func (p *poolTest) status() workflows.PoolStatus {
	p.t.Helper()
	// A query waits for the worker to take it; on a machine loaded by the other packages'
	// worlds one can outlast the CLI's 30 s. It is asked again for as long as any wait here
	// lasts: these tests check the pool's state, never how fast it answers.
	deadline := time.Now().Add(wait)
	for {
		st, err := poolcli.Status(p.ctx, p.c, p.name)
		if err == nil {
			return st
		}
		var late *serviceerror.DeadlineExceeded
		if !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &late)) || time.Now().After(deadline) {
			p.t.Fatalf("status: %v", err)
		}
		p.t.Logf("status: %v; asking again", err)
	}
}

// eventually polls cond until it holds; what names the awaited state for the failure message,
// which also shows the pool's last status.
func (p *poolTest) eventually(timeout time.Duration, what string, cond func(workflows.PoolStatus) bool) workflows.PoolStatus {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := p.status()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out after %s waiting for %s; pool: desired %d, runners %v, why %q",
				timeout, what, st.Desired, runnerStates(st), st.Why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func runnerStates(st workflows.PoolStatus) []string {
	var out []string
	for _, r := range st.Runners {
		out = append(out, r.Name+"="+string(r.State)+"@"+r.TemplateHash)
	}
	return out
}

// count returns how many of the pool's runners are in state on the given template ("" any).
func count(st workflows.PoolStatus, state workflows.RunnerState, hash string) int {
	n := 0
	for _, r := range st.Runners {
		if r.State == state && (hash == "" || r.TemplateHash == hash) {
			n++
		}
	}
	return n
}

// githubRunners returns the double's runners of this pool.
func (p *poolTest) githubRunners() []githubdouble.Runner {
	var out []githubdouble.Runner
	for _, r := range world.GitHub.Runners() {
		if strings.HasPrefix(r.Name, p.name+"-") {
			out = append(out, r)
		}
	}
	return out
}

func (p *poolTest) pods() []corev1.Pod {
	p.t.Helper()
	list, err := world.Kubernetes.CoreV1().Pods(p.ns).List(p.ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	return list.Items
}

func (p *poolTest) queueJobs(n int) []int64 {
	p.t.Helper()
	var ids []int64
	for range n {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: p.org + "/app", Labels: []string{"self-hosted", "linux"}})
		if err != nil {
			p.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}
