//go:build upgradecheck

package upgrade

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	org      = "org-upgrade"
	restPool = "up-rest"
	burst    = "up-burst"
	burstN   = 12
	// stopAfter jobs completed, the earlier release's worker is stopped: mid-burst.
	stopAfter = 3
	wait      = 6 * time.Minute
)

// The earlier release (RUNNERFLOW_UPGRADE_FROM: a folder holding its worker and starter
// binaries) runs a pool at rest and a pool taking a burst; once the pool at rest has checked
// its runners at rest and a few of the burst's jobs are done, its worker is stopped and this
// tree's worker, then its starter, take over. Every job runs once, the pool at rest runs a
// workflow task on the new worker, and no history failed a workflow task for non-determinism
// or fails to replay on this tree's code.
func TestUpgradeFromEarlierRelease(t *testing.T) {
	from := os.Getenv("RUNNERFLOW_UPGRADE_FROM")
	if from == "" {
		t.Fatal("RUNNERFLOW_UPGRADE_FROM must name a folder with the earlier release's worker and starter (make upgrade-check FROM=<release>)")
	}
	u := newUpgrade(t, from)
	u.logf("earlier release: %s", u.version(filepath.Join(from, "worker")))
	intake := u.startStarter(filepath.Join(from, "starter"), "old starter")
	oldWorker := u.startWorker(filepath.Join(from, "worker"), "old worker")
	u.apply(filepath.Join(from, "starter"))
	u.eventually("the pool at rest with its runner idle and a check at rest", func() bool {
		st, err := poolcli.Status(u.ctx, u.c, restPool)
		return err == nil && idle(st) == 1 && u.longestCheckGap(restPool) >= workflows.PoolListingInterval
	})
	u.logf("pool %s at rest on the earlier release: its runner idle, checks at rest", restPool)

	jobs := u.queueBurst()
	u.eventually(fmt.Sprintf("%d of the burst's jobs done", stopAfter), func() bool { return completed(jobs) >= stopAfter })
	done := completed(jobs)
	oldWorker.stop()
	u.logf("earlier release's worker stopped mid-burst: %d of %d jobs done", done, len(jobs))
	switched := time.Now()
	newWorker := u.startWorker(u.build("worker"), "new worker")
	intake.stop()
	u.startStarter(u.build("starter"), "new starter")
	u.logf("this tree's worker (%s) and starter took over", u.version(u.build("worker")))

	u.eventually("every job of the burst completed", func() bool { return completed(jobs) == len(jobs) })
	u.checkRanOnceEach(jobs)
	u.eventually("the pool at rest ran a workflow task on the new worker", func() bool {
		return u.taskBy(workflows.PoolWorkflowID(restPool), newWorker.pid(), switched)
	})
	u.checkHistories()
}

type upgrade struct {
	t    *testing.T
	ctx  context.Context
	c    client.Client
	ns   string
	dir  string
	addr string
}

func newUpgrade(t *testing.T, from string) *upgrade {
	u := &upgrade{t: t, ctx: context.Background(), ns: world.Kube.NewNamespace(t), dir: t.TempDir()}
	if err := world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: world.Temporal.Address, Namespace: world.Temporal.Namespace,
		Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	u.c = c
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = l.Addr().String()
	l.Close()
	world.GitHub.SetWebhookURL("http://" + u.addr + "/webhook")
	t.Cleanup(func() { world.GitHub.SetWebhookURL("") })
	return u
}

func (u *upgrade) logf(format string, args ...any) {
	u.t.Helper()
	u.t.Logf("%s "+format, append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func (u *upgrade) eventually(what string, cond func() bool) {
	u.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			u.t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(time.Second)
	}
}

// queueBurst queues the burst's jobs, with labels only the burst pool's runners fit.
func (u *upgrade) queueBurst() []int64 {
	u.t.Helper()
	var ids []int64
	for range burstN {
		j, err := world.GitHub.QueueJob(githubdouble.JobSpec{Repository: org + "/app", Labels: []string{"self-hosted", "burst"}})
		if err != nil {
			u.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	u.logf("queued %d jobs for pool %s", len(ids), burst)
	return ids
}

func completed(ids []int64) int {
	n := 0
	for _, id := range ids {
		if j, _ := world.GitHub.Job(id); j.Status == githubdouble.StatusCompleted {
			n++
		}
	}
	return n
}

// checkRanOnceEach: every job succeeded on a runner of the burst pool, each runner one job.
func (u *upgrade) checkRanOnceEach(ids []int64) {
	u.t.Helper()
	seen := map[string]int64{}
	for _, id := range ids {
		j, _ := world.GitHub.Job(id)
		if pool, ok := workflows.PoolFromRunnerName(j.RunnerName); j.Conclusion != githubdouble.ConclusionSuccess || !ok || pool != burst {
			u.t.Errorf("job %d: %s on runner %q, want success on a runner of %s", id, j.Conclusion, j.RunnerName, burst)
		}
		if other, dup := seen[j.RunnerName]; dup {
			u.t.Errorf("runner %s ran jobs %d and %d", j.RunnerName, other, id)
		}
		seen[j.RunnerName] = id
	}
	u.logf("every job of the burst ran once: %d jobs on %d runners", len(ids), len(seen))
}

func idle(st workflows.PoolStatus) int {
	n := 0
	for _, r := range st.Runners {
		if r.State == workflows.RunnerIdle {
			n++
		}
	}
	return n
}

// history returns a workflow run's events.
func (u *upgrade) history(id, run string) []*historypb.HistoryEvent {
	u.t.Helper()
	var events []*historypb.HistoryEvent
	it := u.c.GetWorkflowHistory(u.ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			u.t.Fatal(err)
		}
		events = append(events, ev)
	}
	return events
}

// longestCheckGap is the longest time between two consecutive checks for ended runner
// workflows in the pool's current run.
func (u *upgrade) longestCheckGap(pool string) time.Duration {
	var last time.Time
	var gap time.Duration
	for _, ev := range u.history(workflows.PoolWorkflowID(pool), "") {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != workflows.ActivityListEndedRunners {
			continue
		}
		at := ev.GetEventTime().AsTime()
		if !last.IsZero() {
			gap = max(gap, at.Sub(last))
		}
		last = at
	}
	return gap
}

// taskBy reports whether a worker process (by pid) started a workflow task of the workflow's
// current run after since. The worker's identity ends with "/<pid>" (runnerflow's) or begins
// with "<pid>@" (the SDK's default).
func (u *upgrade) taskBy(id string, pid int, since time.Time) bool {
	p := strconv.Itoa(pid)
	for _, ev := range u.history(id, "") {
		a := ev.GetWorkflowTaskStartedEventAttributes()
		if a == nil || !ev.GetEventTime().AsTime().After(since) {
			continue
		}
		if who := a.GetIdentity(); strings.HasSuffix(who, "/"+p) || strings.HasPrefix(who, p+"@") {
			return true
		}
	}
	return false
}

// checkHistories looks at every workflow run in the namespace: none may hold a workflow task
// that failed for non-determinism, and each must replay on this tree's workflow code.
func (u *upgrade) checkHistories() {
	u.t.Helper()
	replayer := worker.NewWorkflowReplayer()
	for _, d := range workflows.Definitions {
		replayer.RegisterWorkflowWithOptions(d.Fn, workflow.RegisterOptions{Name: d.Name})
	}
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	runs, byType := 0, map[string]int{}
	var token []byte
	for {
		resp, err := u.c.ListWorkflow(u.ctx, &workflowservice.ListWorkflowExecutionsRequest{NextPageToken: token})
		if err != nil {
			u.t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			events := u.history(id, run)
			for _, ev := range events {
				if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil && nonDeterministic(f) {
					u.t.Errorf("%s (run %s): a workflow task failed for non-determinism: %s", id, run, f.GetFailure().GetMessage())
				}
			}
			if err := replayer.ReplayWorkflowHistory(logger, &historypb.History{Events: events}); err != nil {
				u.t.Errorf("%s (run %s) does not replay on this tree's code: %v", id, run, err)
			}
			runs++
			byType[e.GetType().GetName()]++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if !u.t.Failed() {
		u.logf("%d workflow runs (%v): no workflow task failed for non-determinism; each replays on this tree's code", runs, byType)
	}
}

// nonDeterministic reports whether a failed workflow task met history its code does not issue:
// the SDK reports a mismatched command as NON_DETERMINISTIC_ERROR and an event it cannot match
// to any command (TMPRL1100, "lookup failed") as a panic of the workflow task.
func nonDeterministic(f *historypb.WorkflowTaskFailedEventAttributes) bool {
	msg := f.GetFailure().GetMessage()
	return f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR ||
		strings.Contains(msg, "TMPRL1100") || strings.Contains(strings.ToLower(msg), "nondeterministic")
}
