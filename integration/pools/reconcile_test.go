package pools

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// reconcileGrace is the tests' grace period: long enough for two looks, short for a test.
const reconcileGrace = 2 * time.Second

// Orphans of every kind, next to what a live pool owns: a registration with a runnerflow name
// and no workflow, a busy one, a runner whose workflow was terminated by hand (its registration,
// its Secret and the pod the Secret owns), a pod alone and a Secret alone whose workflows never
// ran, and a warm registration's Secret in the worker's warm namespace (not the watched one)
// whose registration is gone. A dry run reports them all and removes nothing; the Schedule's run (triggered as an
// operator would) removes every one but the busy registration, and the pool's runner and warm
// registration stay, with their Secrets and pod.
func TestReconcileRemovesOrphansAndKeepsWhatPoolsOwn(t *testing.T) {
	reg := prometheus.NewRegistry()
	warmNS := world.Kube.NewNamespace(t)
	p := newPoolTestWith(t, "recon", func(cfg *workerapp.Config) {
		cfg.Reconcile = &workerapp.ReconcileConfig{Interval: time.Hour, Grace: reconcileGrace}
		cfg.Metrics = reg
		cfg.WarmNamespace = warmNS
	})
	p.warmNS = warmNS
	t.Cleanup(func() { _ = p.c.ScheduleClient().GetHandle(p.ctx, workflows.ReconcileScheduleID).Delete(p.ctx) })
	spec := p.spec(1, 3, "")
	spec.WarmRegistrations = 1
	p.apply(spec)
	st := p.eventually(wait, "an idle runner and a warm registration", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, "") == 1 && st.WarmReady == 1
	})

	terminated := st.Runners[0].Name
	// A runner's Secret lives only until its runner started (the credential window): an idle
	// runner's is gone, or about to be.
	waitFor(t, wait, "the first runner's Secret deleted once it started", func() bool { return !p.exists("secret " + terminated) })
	if err := p.c.TerminateWorkflow(p.ctx, workflows.RunnerWorkflowID(p.name, terminated), "", "test: terminated by hand"); err != nil {
		t.Fatal(err)
	}
	// The pool finds a terminated runner in its check of its runners' workflows (every
	// PoolRunnerCheckInterval at rest), once PoolRunnerEndGrace has passed.
	st = p.eventually(workflows.PoolRunnerCheckInterval+wait, "the terminated runner replaced, a warm registration ready", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, "") == 1 && st.Runners[0].Name != terminated && st.WarmReady == 1
	})
	live, warm := st.Runners[0].Name, st.Warm[0].Name
	waitFor(t, wait, "the live runner's Secret deleted once it started", func() bool { return !p.exists("secret " + live) })
	orphan := workflows.RunnerName(p.name, "dead", 1)
	busy := workflows.RunnerName(p.name, "dead", 2)
	lonePod := workflows.RunnerName(p.name, "dead", 3)
	loneSecret := workflows.RunnerName(p.name, "dead", 4)
	// A warm registration's Secret in the warm namespace, of a registration that is gone.
	loneWarm := workflows.RunnerName(p.name, "dead", 5)
	p.register(orphan, nil)
	release := p.registerBusy(busy)
	defer release()
	p.createObject(&corev1.Pod{ObjectMeta: p.orphanMeta(lonePod), Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"}}}})
	p.createObject(&corev1.Secret{ObjectMeta: p.orphanMeta(loneSecret)})
	warmMeta := p.orphanMeta(loneWarm)
	warmMeta.Namespace = warmNS
	p.createObject(&corev1.Secret{ObjectMeta: warmMeta})
	time.Sleep(reconcileGrace + time.Second) // every object older than the grace period

	// A started runner has no Secret left (its credential is in its namespace only from its
	// pod's scheduling to its start), so the terminated runner leaves a registration and a pod
	// that no Secret owns, and the live one owns a registration and a pod; a warm registration
	// keeps its Secret (in the warm namespace) until a runner takes it.
	want := []string{
		"registration " + orphan, "registration " + terminated, "pod " + terminated,
		"pod " + lonePod, "secret " + loneSecret, "secret " + loneWarm,
	}
	slices.Sort(want)
	kept := []string{"registration " + live, "pod " + live, "registration " + warm, "secret " + warm}

	t.Run("a dry run reports every orphan and removes nothing", func(t *testing.T) {
		report := p.dryRun()
		if got := p.objects(report.Orphans); !slices.Equal(got, want) {
			t.Errorf("would remove %v, want %v", got, want)
		}
		if len(report.Removed) != 0 || len(report.Failed) != 0 {
			t.Errorf("a dry run removed %+v, failed %+v", report.Removed, report.Failed)
		}
		p.checkSkippedBusy(report, busy)
		p.checkNotMentioned(report, live, warm)
		for _, o := range append(slices.Clone(want), kept...) {
			if !p.exists(o) {
				t.Errorf("%s is gone after a dry run", o)
			}
		}
	})

	t.Run("the Schedule's run removes the orphans, never a busy one, and keeps what pools own", func(t *testing.T) {
		report := p.triggerSchedule()
		if got := p.objects(report.Removed); !slices.Equal(got, want) {
			t.Errorf("removed %v, want %v (failed %+v)", got, want, report.Failed)
		}
		for _, r := range report.Removed {
			if r.Kind == workflows.KindPod && r.Runner == terminated && r.Reason != "" {
				t.Errorf("the terminated runner's pod was removed %q, want by its own deletion (no Secret owns it)", r.Reason)
			}
		}
		p.checkSkippedBusy(report, busy)
		p.checkNotMentioned(report, live, warm)
		waitFor(t, wait, "the orphans gone", func() bool {
			return !slices.ContainsFunc(want, p.exists)
		})
		for _, o := range append(kept, "registration "+busy) {
			if !p.exists(o) {
				t.Errorf("%s was removed", o)
			}
		}
		p.eventually(wait, "the pool unharmed", func(st workflows.PoolStatus) bool {
			return count(st, workflows.RunnerIdle, "") == 1 && st.WarmReady == 1
		})
		// Registrations: the orphan's and the terminated runner's. Secrets: the lone one and the
		// lone warm one (a started runner's is gone already). Pods: the lone one and the terminated
		// runner's, each deleted by itself.
		checkRemovedCounted(t, reg, map[string]float64{"registration": 2, "secret": 2, "pod": 2})
	})

	t.Run("the worker keeps the Schedule without undoing a pause", func(t *testing.T) {
		p.checkScheduleKept()
	})
}

// register registers a runner at GitHub under name, as a runner workflow would, with labels
// (default the pool's), and returns its JIT configuration.
func (p *poolTest) register(name string, labels []string) string {
	p.t.Helper()
	gh, err := activities.NewGitHubClient(activities.GitHubConfig{BaseURL: world.GitHub.URL(), Token: world.GitHubToken})
	if err != nil {
		p.t.Fatal(err)
	}
	if labels == nil {
		labels = []string{"self-hosted", "linux"}
	}
	cfg, err := gh.CreateJITConfig(p.ctx, workflows.Scope{Organization: p.org}, activities.JITRequest{Name: name, RunnerGroupID: 1, Labels: labels})
	if err != nil {
		p.t.Fatal(err)
	}
	return cfg.EncodedConfig
}

// registerBusy registers a runner under name that takes a job of its own (labels no pool
// serves), so GitHub lists it busy; release completes the job.
func (p *poolTest) registerBusy(name string) (release func()) {
	p.t.Helper()
	labels := []string{"self-hosted", "reconcile-busy"}
	rc := githubdouble.NewRunnerClient(world.GitHub.URL())
	session, err := rc.ConnectJIT(p.ctx, p.register(name, labels))
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: p.org + "/app", Labels: labels}); err != nil {
		p.t.Fatal(err)
	}
	job, err := rc.AcquireJob(p.ctx, session, 10*time.Second)
	if err != nil || job == nil {
		p.t.Fatalf("the busy runner got no job: %v", err)
	}
	return func() { _ = rc.CompleteJob(context.Background(), session, job.ID, "success") }
}

// orphanMeta labels an object as the named runner's, whose workflow never ran.
func (p *poolTest) orphanMeta(runner string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: runner, Namespace: p.ns,
		Labels: map[string]string{
			runnerpod.LabelManagedBy: runnerpod.ManagedByValue, runnerpod.LabelPool: p.name, runnerpod.LabelRunner: runner,
		},
		Annotations: map[string]string{runnerpod.AnnotationWorkflowID: workflows.RunnerWorkflowID(p.name, runner)},
	}
}

func (p *poolTest) createObject(obj any) {
	p.t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Pod:
		_, err = world.Kubernetes.CoreV1().Pods(p.ns).Create(p.ctx, o, metav1.CreateOptions{})
	case *corev1.Secret:
		_, err = world.Kubernetes.CoreV1().Secrets(cmp.Or(o.Namespace, p.ns)).Create(p.ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		p.t.Fatal(err)
	}
}

// objects names this pool's objects of a report list as "kind runner", sorted.
func (p *poolTest) objects(list []workflows.ReconcileObject) []string {
	var out []string
	for _, o := range list {
		if o.Pool == p.name {
			out = append(out, string(o.Kind)+" "+o.Runner)
		}
	}
	slices.Sort(out)
	return out
}

// exists reports whether "kind runner" exists: at GitHub (not being deleted, in the cluster).
func (p *poolTest) exists(object string) bool {
	p.t.Helper()
	kind, name, _ := strings.Cut(object, " ")
	var err error
	switch workflows.OrphanKind(kind) {
	case workflows.KindRegistration:
		return slices.ContainsFunc(p.githubRunners(), func(r githubdouble.Runner) bool { return r.Name == name })
	case workflows.KindPod:
		var pod *corev1.Pod
		if pod, err = world.Kubernetes.CoreV1().Pods(p.ns).Get(p.ctx, name, metav1.GetOptions{}); err == nil {
			return pod.DeletionTimestamp == nil
		}
	case workflows.KindSecret:
		// A warm registration's Secret is in the warm namespace.
		for _, ns := range slices.Compact([]string{p.ns, cmp.Or(p.warmNS, p.ns)}) {
			if _, err = world.Kubernetes.CoreV1().Secrets(ns).Get(p.ctx, name, metav1.GetOptions{}); err == nil {
				break
			}
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		p.t.Fatal(err)
	}
	return err == nil
}

func (p *poolTest) checkSkippedBusy(report workflows.ReconcileReport, busy string) {
	p.t.Helper()
	i := slices.IndexFunc(report.Skipped, func(o workflows.ReconcileObject) bool { return o.Runner == busy })
	if i < 0 || report.Skipped[i].Kind != workflows.KindRegistration || report.Skipped[i].Reason != workflows.SkipBusy {
		p.t.Errorf("the busy registration %s is not reported skipped as busy: %+v", busy, report.Skipped)
	}
}

// checkNotMentioned checks that what the pool owns is neither an orphan nor skipped: it is the
// pool's.
func (p *poolTest) checkNotMentioned(report workflows.ReconcileReport, runners ...string) {
	p.t.Helper()
	for _, list := range [][]workflows.ReconcileObject{report.Orphans, report.Removed, report.Skipped, report.Failed} {
		for _, o := range list {
			if slices.Contains(runners, o.Runner) {
				p.t.Errorf("the pool's own %s %s is in the report: %+v", o.Kind, o.Runner, o)
			}
		}
	}
}

// dryRun runs a one-off reconcile that removes nothing, as an operator would start one, and
// reads its report through the status query while it runs.
func (p *poolTest) dryRun() workflows.ReconcileReport {
	p.t.Helper()
	in := workflows.ReconcileInput{DryRun: true, Namespace: p.ns, WarmNamespace: p.warmNS, Grace: reconcileGrace}
	run, err := p.c.ExecuteWorkflow(p.ctx, client.StartWorkflowOptions{ID: "reconcile-dry-run-" + p.name, TaskQueue: workflows.TaskQueue},
		workflows.ReconcileWorkflowType, in)
	if err != nil {
		p.t.Fatal(err)
	}
	v, err := p.c.QueryWorkflow(p.ctx, run.GetID(), run.GetRunID(), workflows.QueryStatus)
	var running workflows.ReconcileReport
	if err == nil {
		err = v.Get(&running)
	}
	if err != nil || running.Phase == "" || !running.DryRun {
		p.t.Errorf("status query: %+v, %v", running, err)
	}
	var report workflows.ReconcileReport
	if err := run.Get(p.ctx, &report); err != nil {
		p.t.Fatal(err)
	}
	return report
}

// triggerSchedule runs the Schedule's action now (`temporal schedule trigger`) and waits for
// the run's report.
func (p *poolTest) triggerSchedule() workflows.ReconcileReport {
	p.t.Helper()
	h := p.c.ScheduleClient().GetHandle(p.ctx, workflows.ReconcileScheduleID)
	before, err := h.Describe(p.ctx)
	if err != nil {
		p.t.Fatalf("the worker made no reconcile Schedule: %v", err)
	}
	if err := h.Trigger(p.ctx, client.ScheduleTriggerOptions{}); err != nil {
		p.t.Fatal(err)
	}
	var id string
	waitFor(p.t, wait, "the triggered reconcile", func() bool {
		d, err := h.Describe(p.ctx)
		if err != nil || len(d.Info.RecentActions) <= len(before.Info.RecentActions) {
			return false
		}
		id = d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult.WorkflowID
		return true
	})
	var report workflows.ReconcileReport
	if err := p.c.GetWorkflow(p.ctx, id, "").Get(p.ctx, &report); err != nil {
		p.t.Fatal(err)
	}
	if testworld.RecordingHistories() {
		recordHistory(p.t, id, "", "reconcile")
	}
	return report
}

// checkScheduleKept: a worker start finds the Schedule as it wants it and changes nothing; an
// operator's pause survives a worker that wants another interval, which it sets.
func (p *poolTest) checkScheduleKept() {
	p.t.Helper()
	cfg := workerapp.ReconcileConfig{Interval: time.Hour, Grace: reconcileGrace, WarmNamespace: p.warmNS}
	if result, err := workerapp.EnsureReconcileSchedule(p.ctx, p.c, cfg, p.ns); err != nil || result != "unchanged" {
		p.t.Errorf("ensure with the same configuration: %q, %v; want unchanged", result, err)
	}
	h := p.c.ScheduleClient().GetHandle(p.ctx, workflows.ReconcileScheduleID)
	if err := h.Pause(p.ctx, client.SchedulePauseOptions{Note: "incident 7"}); err != nil {
		p.t.Fatal(err)
	}
	cfg.Interval = 2 * time.Hour
	if result, err := workerapp.EnsureReconcileSchedule(p.ctx, p.c, cfg, p.ns); err != nil || result != "updated" {
		p.t.Errorf("ensure with a new interval: %q, %v; want updated", result, err)
	}
	d, err := h.Describe(p.ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	if !d.Schedule.State.Paused || d.Schedule.Spec.Intervals[0].Every != 2*time.Hour {
		p.t.Errorf("schedule paused %t every %s; want still paused, every 2h", d.Schedule.State.Paused, d.Schedule.Spec.Intervals[0].Every)
	}
}

// checkRemovedCounted waits until runnerflow_reconcile_removed_total counts at least want by
// kind (other tests' leftovers may add to it).
func checkRemovedCounted(t *testing.T, reg *prometheus.Registry, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	waitFor(t, 30*time.Second, "the removals counted", func() bool {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		clear(got)
		for _, f := range families {
			if f.GetName() != "runnerflow_reconcile_removed_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						got[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
		for kind, n := range want {
			if got[kind] < n {
				return false
			}
		}
		return true
	})
}
