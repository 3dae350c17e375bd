package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// `starter why` on jobs the real intake took (or did not): a job its pool has no room for (the
// pool at its maximum), a job whose labels no pool has (kept by the unmatched-jobs workflow,
// with the pool that came closest), and a job whose delivery failed — never received until
// it is redelivered, then held by its pool like the first. Each in text and JSON.
func TestWhyExplainsJobsTheIntakeTookOrMissed(t *testing.T) {
	in := newIntake(t)
	const org = "why-org"
	if err := in.github.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.c.TerminateWorkflow(context.Background(), workflows.UnmatchedJobsWorkflowID, "", "test over")
	})
	pool := "why-full"
	// A pool whose scheduled override holds it at 0 runners now, where its spec allows 2.
	two, zero := 2, 0
	held := in.spec(workflows.PoolSpec{Name: "why-night", Organization: org, Labels: []string{"linux", "night"}})
	held.MaxReplicas = &two
	now := time.Now()
	held.ScheduledOverrides = []workflows.ScheduledOverride{{StartTime: metav1.NewTime(now.Add(-time.Hour)),
		EndTime: metav1.NewTime(now.Add(time.Hour)), MaxReplicas: &zero}}
	in.apply(in.spec(workflows.PoolSpec{Name: pool, Organization: org, Labels: []string{"linux"}}), held) // max 0
	in.waitForRoutable(pool, held.Name)

	night := in.queue(org+"/app", []string{"self-hosted", "linux", "night"})
	in.checkWhy(night, poolcli.CauseOverride, "a scheduled override holds pool why-night at max 0 (spec 2)")

	atMax := in.queue(org+"/app", []string{"self-hosted", "linux"})
	in.checkWhy(atMax, poolcli.CauseAtMax, "pool why-full is at its maximum (0 runners")
	in.checkGetWaiting(pool, atMax, poolcli.CauseAtMax)

	unmatched := in.queue(org+"/app", []string{"self-hosted", "linux", "gpu"})
	r := in.checkWhy(unmatched, poolcli.CauseNoPool, "pool why-full lacks [gpu]")
	if r.Facts.Unmatched == nil || r.Facts.Unmatched.Repository != org+"/app" {
		t.Errorf("unmatched record %+v, want the job's repository %s", r.Facts.Unmatched, org+"/app")
	}
	if got := testutil.ToFloat64(in.metrics.Unmatched("recorded")); got != 1 {
		t.Errorf("recorded %v unmatched jobs, want 1", got)
	}
	if testworld.RecordingHistories() {
		path, err := world.Temporal.RecordHistory(workflows.UnmatchedJobsWorkflowID, "", "unmatched-jobs")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", path)
	}

	// A job for GitHub-hosted runners (no self-hosted, no pool's label) is not recorded.
	hosted := in.queue(org+"/app", []string{"ubuntu-latest"})
	in.waitDelivered()
	in.checkWhy(hosted, poolcli.CauseNotReceived, "never reached the intake")
	if got := testutil.ToFloat64(in.metrics.Unmatched("recorded")); got != 1 {
		t.Errorf("recorded %v unmatched jobs after a GitHub-hosted one, want still 1", got)
	}

	in.github.DropWebhooks(1)
	lost := in.queue(org+"/app", []string{"self-hosted", "linux"})
	in.waitDelivered()
	in.github.DropWebhooks(0)
	in.checkWhy(lost, poolcli.CauseNotReceived, "never reached the intake")
	for _, d := range in.github.Deliveries() {
		if d.JobID == lost {
			if err := in.github.Redeliver(d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	r = in.checkWhy(lost, poolcli.CauseAtMax, "at its maximum")
	if !strings.Contains(whyText(t, in, lost), "delivery received") || r.Facts.Reservation == nil || r.Facts.Reservation.QueuedAt.IsZero() {
		t.Errorf("after the redelivery the path does not show the delivery received: %+v", r.Path)
	}
}

// checkWhy waits until `starter why <job> -o json` names the cause, then checks the detail in
// both the JSON and the text output.
func (in *intake) checkWhy(job int64, cause poolcli.Cause, detail string) poolcli.WhyReport {
	in.t.Helper()
	var r poolcli.WhyReport
	in.eventually("why "+strconv.FormatInt(job, 10)+" says "+string(cause), func() bool {
		r = whyJSON(in.t, in, job)
		return r.Cause == cause
	})
	if !r.Waiting || !strings.Contains(r.Detail, detail) {
		in.t.Errorf("why %d: waiting %v, detail %q; want it waiting with %q", job, r.Waiting, r.Detail, detail)
	}
	text := whyText(in.t, in, job)
	if !strings.Contains(text, "Waiting: "+string(cause)) || !strings.Contains(text, detail) {
		in.t.Errorf("why %d (text):\n%s\nwant cause %s with %q", job, text, cause, detail)
	}
	return r
}

func whyArgs(in *intake, job int64, more ...string) []string {
	return append([]string{strconv.FormatInt(job, 10), "--temporal-address", world.Temporal.Address,
		"--namespace", world.Temporal.Namespace}, more...)
}

func whyText(t *testing.T, in *intake, job int64, more ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := poolcli.RunWhy(context.Background(), whyArgs(in, job, more...), &out); err != nil {
		t.Fatalf("why %d: %v", job, err)
	}
	return out.String()
}

func whyJSON(t *testing.T, in *intake, job int64, more ...string) poolcli.WhyReport {
	t.Helper()
	var out bytes.Buffer
	if err := poolcli.RunWhy(context.Background(), whyArgs(in, job, append(more, "-o", "json")...), &out); err != nil {
		t.Fatalf("why %d: %v", job, err)
	}
	var r poolcli.WhyReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("why %d -o json does not decode (%v):\n%s", job, err, out.String())
	}
	return r
}

// waitDelivered waits until the double has made (or failed) every delivery it holds.
func (in *intake) waitDelivered() {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := in.github.WaitForDeliveries(ctx); err != nil {
		in.t.Fatalf("deliveries: %v", err)
	}
}

// `starter why` on jobs whose runners cannot come up: a pod the node cannot pull the image of
// (the simulator holds it Pending with ImagePullBackOff; `why` reads the pod's own reason with
// --kubeconfig) and a pod the namespace's ResourceQuota refuses (the pool's block report).
func TestWhyExplainsRunnersThatCannotStart(t *testing.T) {
	in := newIntake(t)
	const org = "why-start-org"
	if err := in.github.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	one := 1
	pull := in.spec(workflows.PoolSpec{Name: "why-pull", Organization: org, Labels: []string{"linux", "pull-fails"}})
	pull.MaxReplicas = &one
	pull.Template.Annotations = map[string]string{simulator.AnnotationFault: string(simulator.FaultImagePull)}
	quota := in.spec(workflows.PoolSpec{Name: "why-quota", Organization: org, Labels: []string{"linux", "quota"}})
	quota.MaxReplicas = &one
	quota.Namespace = world.Kube.NewNamespace(t)
	setPodQuotaFull(t, quota.Namespace)
	in.apply(pull, quota)
	in.waitForRoutable(pull.Name, quota.Name)

	pulled := in.queue(org+"/app", []string{"self-hosted", "linux", "pull-fails"})
	var r poolcli.WhyReport
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last why %d: %s (%s); facts %+v", pulled, r.Cause, r.Detail, r.Facts.Runner)
		}
	})
	in.eventually("why names the image pull", func() bool {
		r = whyJSON(t, in, pulled, "--kubeconfig", world.Kube.KubeconfigPath)
		return r.Cause == poolcli.CausePodPending && strings.Contains(r.Detail, "ImagePullBackOff")
	})
	if r.Facts.Runner == nil || !strings.Contains(r.Facts.Runner.UILink, "/workflows/"+url.PathEscape(r.Facts.Runner.WorkflowID)) {
		t.Errorf("runner facts %+v, want the runner workflow's Temporal UI link", r.Facts.Runner)
	}
	text := whyText(t, in, pulled, "--kubeconfig", world.Kube.KubeconfigPath)
	for _, want := range []string{"Waiting: pod-pending", "ImagePullBackOff", "runner workflow runner/why-pull/", "pod why-pull-", "Runner workflow: http"} {
		if !strings.Contains(text, want) {
			t.Errorf("why %d (text) lacks %q:\n%s", pulled, want, text)
		}
	}
	// Without a kubeconfig the pod is not read: the runner is not online since its pod was
	// created, and the detail says how to learn more.
	if r = whyJSON(t, in, pulled); r.Cause != poolcli.CauseNotOnline || !strings.Contains(r.Detail, "--kubeconfig") {
		t.Errorf("why %d without a kubeconfig: %s (%s), want runner-not-online pointing to --kubeconfig", pulled, r.Cause, r.Detail)
	}

	refused := in.queue(org+"/app", []string{"self-hosted", "linux", "quota"})
	in.checkWhy(refused, poolcli.CauseQuota, "exceeded quota")
}

// setPodQuotaFull gives the namespace a ResourceQuota that admits no pod. The test world runs
// no quota controller, so the test writes the quota's status as the controller would.
func setPodQuotaFull(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	zero := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(0, resource.DecimalSI)}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "runners"}, Spec: corev1.ResourceQuotaSpec{Hard: zero}}
	q, err := world.Kubernetes.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status.Hard, q.Status.Used = zero, zero
	if _, err := world.Kubernetes.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// `starter why` on jobs whose runners wait for GitHub's hourly budget: the double allows 12
// requests in 10 minutes, runnerflow keeps a fifth of them back, so a burst of 8 jobs gets a
// few runners and the others' registrations wait at the reserve until the budget resets.
func TestWhyExplainsTheBudgetAtItsReserve(t *testing.T) {
	in := newIntake(t)
	in.github.SetRateLimit(12, 10*time.Minute)
	const org = "why-budget-org"
	if err := in.github.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	eight := 8
	spec := in.spec(workflows.PoolSpec{Name: "why-budget", Organization: org, Labels: []string{"linux", "budget"}})
	spec.MaxReplicas = &eight
	in.apply(spec)
	in.waitForRoutable(spec.Name)
	var jobs []int64
	for range eight {
		jobs = append(jobs, in.queue(org+"/app", []string{"self-hosted", "linux", "budget"}))
	}
	var r poolcli.WhyReport
	var job int64
	in.eventually("a job's why names the budget", func() bool {
		for _, job = range jobs {
			if r = whyJSON(t, in, job); r.Cause == poolcli.CauseBudget {
				return true
			}
		}
		return false
	})
	a := r.Facts.Runner.Activity
	// Usually the job's runner's registration; a runner of the pool leaving at the same moment
	// waits on the same budget for its removal, which holds the job as much.
	if a == nil || a.FailureType != workflows.ErrRateLimited || a.NextAttempt.IsZero() || !strings.Contains(r.Detail, "until "+a.NextAttempt.UTC().Format("15:04:05Z")) {
		t.Errorf("why %d: %s (activity %+v), want a GitHub call waiting at the reserve until its next attempt", job, r.Detail, a)
	}
	in.checkGetWaiting(spec.Name, 0, poolcli.CauseBudget)
	if text := whyText(t, in, job); !strings.Contains(text, "Waiting: github-budget") || !strings.Contains(text, "hourly budget is at its reserve until") {
		t.Errorf("why %d (text):\n%s", job, text)
	}
}

// `starter why` on a job whose runner's cluster does not answer: the API server hangs
// (SIGSTOP), so the runner's registration, which writes its Secret and pod there, times out
// and is retried; `why` names the cluster and the activity's failure.
func TestWhyExplainsAnUnreachableCluster(t *testing.T) {
	in := newIntake(t)
	const org = "why-down-org"
	if err := in.github.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	one := 1
	spec := in.spec(workflows.PoolSpec{Name: "why-down", Organization: org, Labels: []string{"linux", "down"}})
	spec.MaxReplicas = &one
	in.apply(spec)
	in.waitForRoutable(spec.Name)
	if err := world.Kube.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := world.Kube.ResumeAPIServer(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	job := in.queue(org+"/app", []string{"self-hosted", "linux", "down"})
	r := in.checkWhy(job, poolcli.CauseUnreachable, "does not answer")
	if a := r.Facts.Runner.Activity; a == nil || a.Attempt < 2 || a.Failure == "" {
		t.Errorf("why %d: activity %+v, want a retried activity with its failure", job, a)
	}
	resume()
}

// checkGetWaiting checks that `starter get <pool>` lists a waiting job (job, or any when 0)
// with the cause, in JSON and in text.
func (in *intake) checkGetWaiting(pool string, job int64, cause poolcli.Cause) {
	in.t.Helper()
	args := []string{pool, "--temporal-address", world.Temporal.Address, "--namespace", world.Temporal.Namespace}
	var out bytes.Buffer
	if err := poolcli.RunGet(context.Background(), append(args, "-o", "json"), &out); err != nil {
		in.t.Fatalf("get %s: %v", pool, err)
	}
	var v poolcli.PoolView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		in.t.Fatalf("get %s -o json does not decode (%v):\n%s", pool, err, out.String())
	}
	found := false
	for _, w := range v.Waiting {
		found = found || ((job == 0 || w.Job == job) && w.Cause == cause)
	}
	if !found || v.Name != pool {
		in.t.Errorf("get %s -o json: pool %q, waiting %+v; want job %d waiting for %s", pool, v.Name, v.Waiting, job, cause)
	}
	out.Reset()
	if err := poolcli.RunGet(context.Background(), args, &out); err != nil {
		in.t.Fatalf("get %s: %v", pool, err)
	}
	if text := out.String(); !strings.Contains(text, "WAITING JOB") || !strings.Contains(text, string(cause)) {
		in.t.Errorf("get %s (text):\n%s\nwant its waiting jobs with cause %s", pool, text, cause)
	}
}
