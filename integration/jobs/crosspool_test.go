// Package jobs tests what a burst of jobs costs in runners, end to end in the real test world:
// the GitHub double sends signed workflow_job webhooks to the starter's intake, the worker runs
// the pools and runners against a real Temporal server and kube-apiserver, and the simulator
// runs the runners' pods and jobs.
package jobs

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/demo"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	org       = "xp-org"
	smallPool = "xa-small"
	bigPool   = "xb-big"
	perKind   = 8
	// workDuration keeps jobs running long enough that most finish after the test holds
	// the webhooks, so their completed events arrive only after their runners ended.
	workDuration = 20 * time.Second
	// settleWait bounds each wait; generous, for a loaded machine (never a speed check).
	settleWait = 5 * time.Minute
)

// pools: the big pool's runners have every label the small pool's jobs ask for, so they can
// (and here, while the small pool is paused, must) run the small pool's jobs. The small pool's
// name sorts first, so the jobs both pools fit are routed to it (equal scopes tie by name).
var pools = poolYAML(smallPool, "self-hosted, linux") + "---\n" + poolYAML(bigPool, "self-hosted, linux, big")

// poolYAML is one ephemeral organization pool of the test, as `starter apply` reads it.
func poolYAML(name, labels string) string {
	return fmt.Sprintf(`
name: %s
organization: %s
labels: [%s]
ephemeral: true
maxReplicas: 20
scaleDownDelay: 5s
namespace: %s
template:
  spec:
    containers:
      - name: runner
        image: ghcr.io/actions/actions-runner:2.328.0
`, name, org, labels, demo.RunnerNamespace)
}

// TestOneRunnerPerJobAcrossPools: the big pool's runners take the small pool's jobs (the small
// pool is paused meanwhile), and every job's completed webhook arrives only after its runner has
// ended, in reverse order. Every job runs once; the small pool's reservations end when another
// pool's runner takes their jobs (its in_progress event), the big pool's when the runner that
// ran each job ends, not when the late completed events come; both pools end at zero with one
// runner per job and none extra.
func TestOneRunnerPerJobAcrossPools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sys := startSystem(t, ctx, pools)
	defer sys.Stop()
	gh := sys.World.GitHub
	if err := sys.Temporal.SignalWorkflow(ctx, workflows.PoolWorkflowID(smallPool), "", workflows.SignalPause,
		workflows.OperatorRequest{Reason: "test: the big pool's runners take these jobs"}); err != nil {
		t.Fatal(err)
	}

	// The small jobs first: they are the oldest, and only the big pool starts runners.
	var jobs []int64
	for _, labels := range [][]string{{"self-hosted", "linux"}, {"self-hosted", "linux", "big"}} {
		for range perKind {
			j, err := gh.QueueJob(githubdouble.JobSpec{Repository: org + "/app", Labels: labels})
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, j.ID)
		}
	}
	w := waiter{t: t, ctx: ctx, sys: sys, pools: []string{smallPool, bigPool}}
	w.until("every job started", func() bool { return w.count(jobs, githubdouble.StatusQueued) == 0 })
	w.until("the small pool's reservations ended by the in_progress events of the big pool's runners", func() bool {
		return w.status(smallPool).Reservations == 0
	})

	gh.HoldWebhooks()
	if err := sys.Temporal.SignalWorkflow(ctx, workflows.PoolWorkflowID(smallPool), "", workflows.SignalResume, workflows.OperatorRequest{}); err != nil {
		t.Fatal(err)
	}
	w.until("every job completed", func() bool { return w.count(jobs, githubdouble.StatusCompleted) == len(jobs) })
	held := 0
	for _, d := range gh.Deliveries() {
		if !d.Done && d.Action == workflows.JobCompleted {
			held++
		}
	}
	w.until("both pools at zero while completed events are still held", func() bool { return w.idle(smallPool) && w.idle(bigPool) })
	t.Logf("%d completed events were held until the pools had settled", held)

	gh.ReleaseWebhooks(githubdouble.ReleaseReversed)
	w.until("every held delivery sent", func() bool {
		for _, d := range gh.Deliveries() {
			if !d.Done {
				return false
			}
		}
		return true
	})
	time.Sleep(5 * time.Second) // a scale window's length and more: any late effect shows now
	for _, p := range []string{smallPool, bigPool} {
		if !w.idle(p) {
			st := w.status(p)
			t.Errorf("pool %s after the late completed events: %d runners, %d reservations", p, len(st.Runners), st.Reservations)
		}
	}

	ranOn := map[string]int{}
	for _, id := range jobs {
		j, _ := gh.Job(id)
		pool, ok := workflows.PoolFromRunnerName(j.RunnerName)
		if j.Status != githubdouble.StatusCompleted || j.Conclusion != githubdouble.ConclusionSuccess || !ok {
			t.Errorf("job %d: %s/%s on runner %q, want completed successfully on a pool's runner", id, j.Status, j.Conclusion, j.RunnerName)
		}
		ranOn[pool]++
	}
	if ranOn[bigPool] != len(jobs) {
		t.Errorf("jobs ran on %v; want all %d on the big pool's runners (the small pool was paused)", ranOn, len(jobs))
	}
	if testworld.RecordingHistories() {
		w.record(workflows.PoolWorkflowID(bigPool), "pool-crosspool")
		w.record(workflows.ScaleWindowWorkflowID(smallPool), "scale-window-crosspool")
		if st := w.status(bigPool); len(st.Finished) > 0 {
			w.record(workflows.RunnerWorkflowID(bigPool, st.Finished[0].Name), "runner-crosspool")
		}
	}
	small, big := w.status(smallPool), w.status(bigPool)
	if started := small.Totals.Started + big.Totals.Started; started != int64(len(jobs)) || held == 0 {
		t.Errorf("%d runners started (small %d, big %d) for %d jobs, %d completed events held: want one runner per job",
			started, small.Totals.Started, big.Totals.Started, len(jobs), held)
	}
}

// waiter polls the world until a condition holds, failing the test after settleWait.
type waiter struct {
	t   *testing.T
	ctx context.Context
	sys *demo.System
	// pools are the test's pools, described when a wait gives up.
	pools []string
}

func (w waiter) until(what string, ok func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(settleWait)
	for !ok() {
		if time.Now().After(deadline) || w.ctx.Err() != nil {
			var pools []string
			for _, p := range w.pools {
				pools = append(pools, p+": "+w.describe(p))
			}
			w.t.Fatalf("waiting for %s: gave up after %s; %s", what, settleWait, strings.Join(pools, "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// record exports a workflow's latest run into workflows/testdata for the replay test.
func (w waiter) record(workflowID, name string) {
	w.t.Helper()
	path, err := w.sys.World.Temporal.RecordHistory(workflowID, "", name)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("recorded %s", path)
}

// count is how many of the jobs have the status at the double.
func (w waiter) count(jobs []int64, status string) int {
	n := 0
	for _, id := range jobs {
		if j, _ := w.sys.World.GitHub.Job(id); j.Status == status {
			n++
		}
	}
	return n
}

func (w waiter) status(pool string) workflows.PoolStatus {
	w.t.Helper()
	v, err := w.sys.Temporal.QueryWorkflow(w.ctx, workflows.PoolWorkflowID(pool), "", workflows.QueryStatus)
	if err != nil {
		w.t.Fatalf("status of %s: %v", pool, err)
	}
	var st workflows.PoolStatus
	if err := v.Get(&st); err != nil {
		w.t.Fatal(err)
	}
	return st
}

func (w waiter) idle(pool string) bool {
	st := w.status(pool)
	return len(st.Runners) == 0 && st.Reservations == 0
}

func (w waiter) describe(pool string) string {
	st := w.status(pool)
	var runners []string
	for _, r := range st.Runners {
		done := ""
		if r.JobDone {
			done = "/job-done"
		}
		runners = append(runners, r.Name+"/"+string(r.State)+done)
	}
	var finished []string
	for _, r := range st.Finished {
		finished = append(finished, fmt.Sprintf("%s/%s at %s (%s)", r.Name, r.State, r.At.Format("15:04:05.000"), r.Reason))
	}
	return fmt.Sprintf("%d reservations, runners [%s], finished [%s], started %d, why %q",
		st.Reservations, strings.Join(runners, " "), strings.Join(finished, ", "), st.Totals.Started, st.Why)
}

// startSystem starts the whole system with the organization's repository and the pools
// applied; the caller stops it (before its context ends, as a deferred Stop after the
// deferred cancel does).
func startSystem(t *testing.T, ctx context.Context, pools string) *demo.System {
	t.Helper()
	sys, err := demo.Start(ctx, demo.SystemConfig{WorkDuration: workDuration})
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.World.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		sys.Stop()
		t.Fatal(err)
	}
	if err := sys.ApplyPools(ctx, []byte(pools), io.Discard); err != nil {
		sys.Stop()
		t.Fatal(err)
	}
	return sys
}
