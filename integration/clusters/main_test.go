// Package clusters tests runnerflow across several Kubernetes clusters in the real test
// world: the world's own kube-apiserver is cluster "a", a second one with its own etcd,
// garbage collector and runner simulator is cluster "b", and both simulators run their runners
// against the one GitHub double. Workers are assembled by workerapp as the worker binary does,
// with named clusters (--cluster) and no default cluster.
package clusters

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

var (
	world *testworld.World
	// second is cluster "b"; cluster "a" is the world's own API server.
	second *testworld.Cluster
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the world and the second cluster, runs the tests and stops both.
func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := testworld.StartWorld(ctx, testworld.WorldOptions{WorkDuration: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test world:", err)
		return 1
	}
	defer w.Stop()
	world = w
	if second, err = w.StartCluster(ctx, testworld.ClusterOptions{Name: "b", WorkDuration: time.Second}); err != nil {
		fmt.Fprintln(os.Stderr, "start cluster b:", err)
		return 1
	}
	defer second.Stop()
	return m.Run()
}

const wait = 2 * time.Minute

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// clusterA and clusterB are the two clusters as a worker is given them.
func clusterA() workerapp.ClusterConfig {
	return workerapp.ClusterConfig{Name: "a", Kube: world.Kube.Config}
}
func clusterB() workerapp.ClusterConfig {
	return workerapp.ClusterConfig{Name: "b", Kube: second.Kube.Config}
}

// kubeOf is the test's client of a cluster.
func kubeOf(cluster string) kubernetes.Interface {
	if cluster == "a" {
		return world.Kubernetes
	}
	return second.Kubernetes
}

// clusterTest is one test's organization at the double, a namespace of the same name in both
// clusters, and a Temporal client.
type clusterTest struct {
	t   *testing.T
	ctx context.Context
	org string
	ns  string
	c   client.Client
}

func newClusterTest(t *testing.T, org string) *clusterTest {
	t.Helper()
	ct := &clusterTest{t: t, ctx: context.Background(), org: org, ns: world.Kube.NewNamespace(t)}
	// The same namespace in cluster b: a pool's namespace is the same wherever its runners go.
	if _, err := second.Kubernetes.CoreV1().Namespaces().Create(ct.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ct.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(quietLogger())})
	if err != nil {
		t.Fatal(err)
	}
	ct.c = c
	t.Cleanup(c.Close)
	return ct
}

// startWorker starts a worker serving the given named clusters and no default cluster. Its
// cleanup is registered before the pools', so pools are terminated before it stops.
func (ct *clusterTest) startWorker(identity string, clusters ...workerapp.ClusterConfig) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	app, err := workerapp.New(workerapp.Config{
		Metrics:         reg,
		TemporalAddress: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Clusters: clusters, WatchNamespace: ct.ns, Identity: identity,
		GitHub: activities.GitHubConfig{BaseURL: world.GitHub.URL(), Token: world.GitHubToken},
		Logger: quietLogger(),
	})
	if err != nil {
		ct.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	ct.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			ct.t.Errorf("worker %s: %v", identity, err)
		}
	})
	return reg
}

// gauge reads a gauge of reg by name and label values (-1 when the series is not there).
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// spec is a pool of the test's organization placed on clusters, its runners labelled with
// the pool's name so each pool's jobs go to its own runners.
func (ct *clusterTest) spec(name string, minR int, clusters ...string) workflows.PoolSpec {
	maxR := 6
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simulator.AnnotationWorkDuration: "1s"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"},
		}},
	}
	return workflows.PoolSpec{
		Name: name, Organization: ct.org, Labels: []string{"self-hosted", name},
		MinReplicas: minR, MaxReplicas: &maxR, Namespace: ct.ns, Template: tmpl, Clusters: clusters,
		ScaleDownDelay: &metav1.Duration{Duration: time.Second},
	}.WithDefaults()
}

// apply starts the pools with `starter apply`'s code; each pool is terminated when the test ends.
func (ct *clusterTest) apply(specs ...workflows.PoolSpec) {
	ct.t.Helper()
	if _, err := poolcli.Apply(ct.ctx, ct.c, specs); err != nil {
		ct.t.Fatalf("apply: %v", err)
	}
	for _, s := range specs {
		ct.t.Cleanup(func() { ct.terminate(s.Name) })
	}
}

// terminate ends a pool workflow and any runner workflow of it still running.
func (ct *clusterTest) terminate(pool string) {
	_ = ct.c.TerminateWorkflow(ct.ctx, workflows.PoolWorkflowID(pool), "", "test over")
	resp, err := ct.c.ListWorkflow(ct.ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`RunnerPool = %q AND ExecutionStatus = "Running"`, pool)})
	if err != nil {
		return
	}
	for _, e := range resp.GetExecutions() {
		_ = ct.c.TerminateWorkflow(ct.ctx, e.GetExecution().GetWorkflowId(), "", "test over")
	}
}

func (ct *clusterTest) status(pool string) workflows.PoolStatus {
	ct.t.Helper()
	st, err := poolcli.Status(ct.ctx, ct.c, pool)
	if err != nil {
		ct.t.Fatalf("status: %v", err)
	}
	return st
}

func (ct *clusterTest) scale(pool string, minR int) {
	ct.t.Helper()
	h, err := ct.c.UpdateWorkflow(ct.ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.PoolWorkflowID(pool), UpdateName: workflows.UpdateScale,
		Args: []any{workflows.ScaleRequest{Min: &minR}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ct.ctx, nil)
	}
	if err != nil {
		ct.t.Fatalf("scale %s: %v", pool, err)
	}
}

func (ct *clusterTest) drain(pool string) {
	ct.t.Helper()
	if err := ct.c.SignalWorkflow(ct.ctx, workflows.PoolWorkflowID(pool), "", workflows.SignalDrain,
		workflows.DrainRequest{Reason: "test over"}); err != nil {
		ct.t.Fatal(err)
	}
}

// eventually polls cond until it holds, failing the test with what and detail after wait.
func (ct *clusterTest) eventually(what string, cond func() bool, detail func() string) {
	ct.t.Helper()
	ct.eventuallyWithin(wait, what, cond, detail)
}

// eventuallyWithin is eventually with its own bound.
func (ct *clusterTest) eventuallyWithin(wait time.Duration, what string, cond func() bool, detail func() string) {
	ct.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			ct.t.Fatalf("timed out after %s waiting for %s; %s", wait, what, detail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// runnersOn is how many of the pool's runners its status places on cluster, in state ("" any).
func runnersOn(st workflows.PoolStatus, cluster string, state workflows.RunnerState) int {
	n := 0
	for _, r := range st.Runners {
		if r.Cluster == cluster && (state == "" || r.State == state) {
			n++
		}
	}
	return n
}

func describe(st workflows.PoolStatus) string {
	var parts []string
	for _, r := range st.Runners {
		parts = append(parts, fmt.Sprintf("%s@%s=%s", r.Name, r.Cluster, r.State))
	}
	return fmt.Sprintf("pool %s: clusters %+v, runners [%s], why %q", st.Name, st.Clusters, strings.Join(parts, " "), st.Why)
}

// objectsOf names the pool's pods and Secrets in a cluster's namespace, "" when there are none.
func (ct *clusterTest) objectsOf(pool, cluster string) string {
	ct.t.Helper()
	kube := kubeOf(cluster)
	var left []string
	pods, err := kube.CoreV1().Pods(ct.ns).List(ct.ctx, metav1.ListOptions{})
	if err != nil {
		ct.t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, pool+"-") {
			left = append(left, "pod/"+p.Name)
		}
	}
	secrets, err := kube.CoreV1().Secrets(ct.ns).List(ct.ctx, metav1.ListOptions{})
	if err != nil {
		ct.t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, pool+"-") {
			left = append(left, "secret/"+s.Name)
		}
	}
	return strings.Join(left, " ")
}

// registrations names the pool's runners the double still lists.
func registrations(pool string) []string {
	var out []string
	for _, r := range world.GitHub.Runners() {
		if strings.HasPrefix(r.Name, pool+"-") {
			out = append(out, r.Name)
		}
	}
	return out
}

// checkNothingLeft drains the pool and waits until no runner, pod, Secret or registration of
// it is left in either cluster or at GitHub.
func (ct *clusterTest) checkNothingLeft(pool string) {
	ct.t.Helper()
	ct.drain(pool)
	ct.eventually(pool+" with no runners", func() bool { return len(ct.status(pool).Runners) == 0 },
		func() string { return describe(ct.status(pool)) })
	for _, cluster := range []string{"a", "b"} {
		ct.eventually("no pod or Secret of "+pool+" in cluster "+cluster, func() bool { return ct.objectsOf(pool, cluster) == "" },
			func() string { return "left: " + ct.objectsOf(pool, cluster) })
	}
	ct.eventually("no registration of "+pool+" at GitHub", func() bool { return len(registrations(pool)) == 0 },
		func() string { return fmt.Sprint("left: ", registrations(pool)) })
}

// runJobs queues n jobs for the pool's label and waits until every one completed on a runner
// of the pool; it returns the runners that ran them.
func (ct *clusterTest) runJobs(pool string, n int) []string {
	ct.t.Helper()
	var ids []int64
	for range n {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: ct.org + "/app", Labels: []string{"self-hosted", pool}})
		if err != nil {
			ct.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	var ran []string
	ct.eventually(fmt.Sprintf("%d jobs of %s completed", n, pool), func() bool {
		ran = ran[:0]
		for _, id := range ids {
			j, _ := world.GitHub.Job(id)
			if j.Status != githubdouble.StatusCompleted {
				return false
			}
			ran = append(ran, j.RunnerName)
		}
		return true
	}, func() string { return describe(ct.status(pool)) })
	for _, r := range ran {
		if p, ok := workflows.PoolFromRunnerName(r); !ok || p != pool {
			ct.t.Errorf("a job of %s ran on %q", pool, r)
		}
	}
	return slices.Clone(ran)
}
