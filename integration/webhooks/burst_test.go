package webhooks

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	burstJobs     = 500
	unroutedJobs  = 10
	redeliverEach = 10 // every 10th delivery is sent twice
	wait          = 3 * time.Minute
)

// jobKind is one way a job is routed: its repository and labels, and the pool it must reach.
type jobKind struct {
	repo   string
	labels []string
	pool   string
}

// TestBurstCountsEveryEventOnce fires 500 queued webhooks across three pools (repository,
// organization and enterprise scope), shuffled, some delivered twice, plus jobs of a user
// repository no pool serves. Each pool must end with exactly its jobs reserved, after about one
// pool update per scale window rather than one per event. Then every job completes — the
// completions reversed, some queued events redelivered after them — and every pool's
// reservations return to zero.
func TestBurstCountsEveryEventOnce(t *testing.T) {
	in := newIntake(t)
	const org, ent, user = "burst-org", "burst-ent", "burst-user"
	for _, r := range []githubdouble.RepositorySpec{
		{FullName: org + "/app", Enterprise: ent}, {FullName: org + "/web", Enterprise: ent},
		{FullName: user + "/dotfiles", OwnerType: "User"},
	} {
		if err := in.github.AddRepository(r); err != nil {
			t.Fatal(err)
		}
	}
	repoPool, orgPool, entPool := "burst-repo", "burst-org", "burst-ent"
	in.apply(
		in.spec(workflows.PoolSpec{Name: repoPool, Repository: org + "/app", Labels: []string{"linux"}}),
		in.spec(workflows.PoolSpec{Name: orgPool, Organization: org, Labels: []string{"linux"}}),
		in.spec(workflows.PoolSpec{Name: entPool, Enterprise: ent, Labels: []string{"linux", "gpu"}}),
	)
	in.waitForRoutable(repoPool, orgPool, entPool)

	kinds := []jobKind{
		{org + "/app", []string{"self-hosted", "linux"}, repoPool},       // repository pool wins
		{org + "/web", []string{"self-hosted", "linux"}, orgPool},        // organization pool
		{org + "/web", []string{"self-hosted", "linux", "gpu"}, entPool}, // only the enterprise pool has gpu
		{org + "/app", []string{"self-hosted", "Linux", "GPU"}, entPool}, // labels compared case-insensitively
	}
	in.github.HoldWebhooks()
	want := map[string][]int64{}
	for i := range burstJobs {
		k := kinds[i%len(kinds)]
		want[k.pool] = append(want[k.pool], in.queue(k.repo, k.labels))
	}
	var userJobs []int64
	for range unroutedJobs {
		userJobs = append(userJobs, in.queue(user+"/dotfiles", []string{"self-hosted", "linux"}))
	}
	released := in.github.ReleaseWebhooks(githubdouble.ReleaseShuffled)
	in.redeliverSome(func(d githubdouble.Delivery) bool { return d.Action == "queued" })
	in.settle(released, repoPool, orgPool, entPool)

	for _, pool := range []string{repoPool, orgPool, entPool} {
		in.checkReserved(pool, want[pool])
	}

	// Completions: every job is cancelled (completed without a runner), delivered newest
	// first, and some queued events are redelivered after their completions.
	in.github.HoldWebhooks()
	for _, id := range slices.Concat(want[repoPool], want[orgPool], want[entPool], userJobs) {
		if err := in.github.CancelJob(id); err != nil {
			t.Fatal(err)
		}
	}
	released = in.github.ReleaseWebhooks(githubdouble.ReleaseReversed)
	in.redeliverSome(func(d githubdouble.Delivery) bool { return d.Action == "queued" && !d.Redelivery })
	in.settle(released, repoPool, orgPool, entPool)
	for _, pool := range []string{repoPool, orgPool, entPool} {
		if st := in.status(pool); st.Reservations != 0 || len(st.Reserved) != 0 {
			t.Errorf("pool %s still holds %d reservations (%v) after every job completed", pool, st.Reservations, reservedJobs(st))
		}
	}

	in.checkDeliveries(userJobs)
	p50, n := in.ackPercentile(50)
	p99, _ := in.ackPercentile(99)
	pmax, _ := in.ackPercentile(100)
	t.Logf("starter answered %d deliveries: p50 %v, p99 %v, max %v (GitHub allows 10 s)", n, p50, p99, pmax)
}

// checkReserved: the pool reserves exactly its jobs, after one update per scale window and far
// fewer updates than events.
func (in *intake) checkReserved(pool string, want []int64) {
	in.t.Helper()
	st := in.status(pool)
	if got := reservedJobs(st); !slices.Equal(got, want) {
		in.t.Errorf("pool %s reserves %d jobs, want exactly its %d: missing %v, extra %v",
			pool, len(got), len(want), minus(want, got), minus(got, want))
	}
	if st.Reservations != len(want) {
		in.t.Errorf("pool %s counts %d active reservations, want %d", pool, st.Reservations, len(want))
	}
	updates, windows := in.reservationUpdates(pool)
	in.t.Logf("pool %s: %d queued jobs reserved by %d pool updates from %d scale windows", pool, len(want), updates, windows)
	if updates != windows {
		in.t.Errorf("pool %s got %d reservation updates from %d windows, want one per window", pool, updates, windows)
	}
	if updates*10 > len(want) {
		in.t.Errorf("pool %s got %d reservation updates for %d events: not batched", pool, updates, len(want))
	}
}

// spec completes a test pool: no runners at all (max 0), so the reservations stay exactly as
// the webhooks leave them, waiting beyond max with their clocks restarted.
func (in *intake) spec(s workflows.PoolSpec) workflows.PoolSpec {
	zero := 0
	s.MaxReplicas = &zero
	s.Namespace = in.ns
	s.Template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: runnerpod.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:2.320.0"},
	}}}
	return s.WithDefaults()
}

func (in *intake) apply(specs ...workflows.PoolSpec) {
	in.t.Helper()
	if _, err := poolcli.Apply(context.Background(), in.c, specs); err != nil {
		in.t.Fatalf("apply: %v", err)
	}
	in.t.Cleanup(func() {
		for _, s := range specs {
			_ = in.c.TerminateWorkflow(context.Background(), workflows.PoolWorkflowID(s.Name), "", "test over")
		}
	})
}

// waitForRoutable waits until the intake's pool table has every pool with its published scope.
func (in *intake) waitForRoutable(pools ...string) {
	in.t.Helper()
	in.eventually(fmt.Sprintf("pools %v routable", pools), func() bool {
		if err := in.handler.Pools().Refresh(context.Background()); err != nil {
			in.t.Fatal(err)
		}
		have := map[string]bool{}
		for _, p := range in.handler.Pools().Pools() {
			have[p.Name] = true
		}
		for _, p := range pools {
			if !have[p] {
				return false
			}
		}
		return true
	})
}

func (in *intake) queue(repo string, labels []string) int64 {
	in.t.Helper()
	j, err := in.github.QueueJob(githubdouble.JobSpec{Repository: repo, Labels: labels})
	if err != nil {
		in.t.Fatal(err)
	}
	return j.ID
}

// redeliverSome sends every redeliverEach-th matching delivery again under its delivery id.
func (in *intake) redeliverSome(match func(githubdouble.Delivery) bool) {
	in.t.Helper()
	n := 0
	for _, d := range in.github.Deliveries() {
		if !match(d) {
			continue
		}
		if n++; n%redeliverEach == 0 {
			if err := in.github.Redeliver(d.ID); err != nil {
				in.t.Fatal(err)
			}
		}
	}
}

// settle waits until the double has delivered everything and each pool's scale window has
// closed, so the pools' books are final.
func (in *intake) settle(released int, pools ...string) {
	in.t.Helper()
	if released == 0 {
		in.t.Fatal("no webhooks were held for the burst")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := in.github.WaitForDeliveries(ctx); err != nil {
		in.t.Fatalf("deliveries: %v", err)
	}
	in.eventually("scale windows closed", func() bool {
		for _, p := range pools {
			d, err := in.c.DescribeWorkflowExecution(context.Background(), workflows.ScaleWindowWorkflowID(p), "")
			if err != nil {
				in.t.Fatalf("window of %s: %v", p, err)
			}
			if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return false
			}
		}
		return true
	})
}

func (in *intake) status(pool string) workflows.PoolStatus {
	in.t.Helper()
	st, err := poolcli.Status(context.Background(), in.c, pool)
	if err != nil {
		in.t.Fatal(err)
	}
	return st
}

func reservedJobs(st workflows.PoolStatus) []int64 {
	var ids []int64
	for _, r := range st.Reserved {
		ids = append(ids, r.JobID)
	}
	slices.Sort(ids)
	return ids
}

// minus returns the ids in a that are not in b.
func minus(a, b []int64) []int64 {
	var out []int64
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// reservationUpdates counts the reservation updates every run of the pool accepted, and the
// distinct scale-window runs they came from (the update id is the window's run).
func (in *intake) reservationUpdates(pool string) (updates, windows int) {
	in.t.Helper()
	ctx := context.Background()
	resp, err := in.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflows.PoolWorkflowID(pool)),
	})
	if err != nil {
		in.t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range resp.GetExecutions() {
		it := in.c.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false,
			enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				in.t.Fatal(err)
			}
			req := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest()
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED &&
				req.GetInput().GetName() == workflows.UpdateReservations {
				updates++
				ids[req.GetMeta().GetUpdateId()] = true
			}
		}
	}
	return updates, len(ids)
}

// checkDeliveries: every delivery was answered 2xx (GitHub shows anything else as failed), and
// every delivery about a job no pool serves was counted as unrouted.
func (in *intake) checkDeliveries(userJobs []int64) {
	in.t.Helper()
	unrouted := 0
	statuses := map[int]int{}
	for _, d := range in.github.Deliveries() {
		statuses[d.StatusCode]++
		if d.StatusCode < 200 || d.StatusCode > 299 {
			in.t.Errorf("delivery %s (%s %s, job %d) answered %d %s", d.ID, d.Event, d.Action, d.JobID, d.StatusCode, d.Error)
		}
		if slices.Contains(userJobs, d.JobID) {
			unrouted++
		}
	}
	in.t.Logf("deliveries by status: %v", statuses)
	if got := testutil.ToFloat64(in.metrics.Events("workflow_job", webhook.OutcomeUnrouted)); int(got) != unrouted {
		in.t.Errorf("counted %v unrouted deliveries, want %d", got, unrouted)
	}
	if len(statuses) == 0 {
		in.t.Error("no deliveries recorded")
	}
}

// eventually polls cond until it holds, failing the test after the wait bound.
func (in *intake) eventually(what string, cond func() bool) {
	in.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			in.t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
