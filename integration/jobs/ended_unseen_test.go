package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/demo"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	endsPool   = "xe-ends"
	unseenPool = "xu-unseen"
	// getJobRoute is GitHub's read of one job, the check of reserved jobs' only call.
	getJobRoute = "GET /repos/{owner}/{repo}/actions/jobs/{job_id}"
	// endedUnseenJobs is how many jobs each test runs before the pool hears of them.
	endedUnseenJobs = 3
)

// TestRunnerEndsBeforeItsJobsEvents: the pool reserves the jobs, then their in_progress and
// completed webhooks are held and GitHub's reads of single jobs fail, so each runner runs its
// job and ends (its pod succeeded) before the pool learns which job it ran, and no check of
// reserved jobs can say: each end stands for one reservation that is over (an unattributed
// end), and the pool wants no runner while the reservations still hold. Once the events
// arrive, each lifts the end it accounts for as it ends its reservation, instead of the job
// being counted over twice: jobs queued next start their runners at once, not after the ends'
// hold lapses. Every pool ends at zero with one runner per job.
func TestRunnerEndsBeforeItsJobsEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sys := startSystem(t, ctx, poolYAML(endsPool, "self-hosted, linux, ends"))
	defer sys.Stop()
	gh := sys.World.GitHub
	gh.StartOutage(githubdouble.Outage{Routes: []string{getJobRoute}})
	defer gh.EndOutage()
	labels := []string{"self-hosted", "linux", "ends"}
	w := waiter{t: t, ctx: ctx, sys: sys, pools: []string{endsPool}}

	// The jobs' queued events go out, and every event after them is held: no runner exists
	// before the queued events reach the pool, so none can have started a job yet.
	gh.HoldWebhooks()
	released := false
	defer func() {
		if !released {
			gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
		}
	}()
	jobs := queueJobs(t, gh, labels, endedUnseenJobs)
	gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
	gh.HoldWebhooks()
	w.until("the jobs' queued events delivered", func() bool { return delivered(gh, jobs, workflows.JobQueued) == len(jobs) })
	w.until("the pool reserving every job", func() bool { return w.status(endsPool).Reservations == len(jobs) })
	w.until("every job completed at GitHub", func() bool { return w.count(jobs, githubdouble.StatusCompleted) == len(jobs) })
	w.until("every runner that ran them ended", func() bool { return len(w.status(endsPool).Runners) == 0 })
	st := w.status(endsPool)
	if st.Reservations != len(jobs) || st.Desired != 0 || st.Totals.Started != int64(len(jobs)) {
		t.Errorf("with the runners ended and no event of their jobs: %d reservations, desired %d, started %d; want %d, 0 and %d (%s)",
			st.Reservations, st.Desired, st.Totals.Started, len(jobs), len(jobs), w.describe(endsPool))
	}
	for _, f := range st.Finished {
		if f.State != workflows.RunnerDone || f.Reason != workflows.EndReasonPodSucceeded {
			t.Errorf("runner %s ended %s (%s), want done because its pod succeeded", f.Name, f.State, f.Reason)
		}
	}

	n := gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
	released = true
	w.until("every held delivery sent", func() bool { return allDelivered(gh) })
	w.until("the reservations ended by the late events", func() bool { return w.status(endsPool).Reservations == 0 })
	t.Logf("%d held events delivered after the runners ended", n)

	// The ends were lifted by the events that accounted for them: the next jobs are not kept
	// waiting for the ends' hold (UnattributedEndHold) to lapse, nor for a check that fails.
	queued := time.Now()
	next := queueJobs(t, gh, labels, 2)
	w.until("the next jobs started", func() bool { return w.count(next, githubdouble.StatusQueued) == 0 })
	t.Logf("the next jobs started %s after they were queued", time.Since(queued).Round(100*time.Millisecond))
	if waited := time.Since(queued); waited >= workflows.UnattributedEndHold/2 {
		t.Errorf("the next jobs waited %s for their runners: the late events counted the jobs over twice", waited.Round(time.Second))
	}
	gh.EndOutage()
	all := append(jobs, next...)
	w.until("every job completed", func() bool { return w.count(all, githubdouble.StatusCompleted) == len(all) })
	w.until("the pool at zero", func() bool { return w.idle(endsPool) })
	if st := w.status(endsPool); st.Totals.Started != int64(len(all)) {
		t.Errorf("started %d runners for %d jobs, want one per job", st.Totals.Started, len(all))
	}
	checkRanOnceEach(t, gh, all)
	if testworld.RecordingHistories() {
		w.record(workflows.PoolWorkflowID(endsPool), "pool-ends-first")
	}
}

// TestScaleSetRunnerEndsBeforeItsMessages: a scale-set pool's runners get their
// configurations, then the Actions service answers 503 to every call, so the listener hears
// no more of the set's messages (one poll already waiting may still bring one batch): the
// runners run their jobs and end before a message names them at their jobs. The pool counts
// each as one of the set's waiting jobs done (scaleSet.finished) and starts no second runner
// for a job that already ran; once the service is back, the messages name the runners and the
// pool ends at zero with one runner per job.
func TestScaleSetRunnerEndsBeforeItsMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sys := startSystem(t, ctx, scaleSetPoolYAML(unseenPool, "self-hosted, linux, unseen", "5s"))
	defer sys.Stop()
	gh := sys.World.GitHub
	w := waiter{t: t, ctx: ctx, sys: sys, pools: []string{unseenPool}}
	var setID int64
	w.until("the set listened to", func() bool {
		st := w.status(unseenPool)
		if st.ScaleSet == nil || st.ScaleSet.ScaleSetID == 0 || !st.ScaleSet.Listening {
			return false
		}
		setID = st.ScaleSet.ScaleSetID
		for _, s := range gh.ScaleSets() {
			if s.ID == setID && s.SessionID != "" {
				return true
			}
		}
		return false
	})

	minted := jitMinted(gh)
	jobs := queueJobs(t, gh, []string{"self-hosted", "linux", "unseen"}, endedUnseenJobs)
	deadline := time.Now().Add(settleWait)
	for jitMinted(gh)-minted < len(jobs) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for the runners' configurations: gave up after %s; %s", settleWait, w.describe(unseenPool))
		}
		time.Sleep(10 * time.Millisecond)
	}
	gh.StartActionsServiceOutage(0)
	inOutage := true
	defer func() {
		if inOutage {
			gh.EndActionsServiceOutage()
		}
	}()
	w.until("every job completed at GitHub", func() bool { return w.count(jobs, githubdouble.StatusCompleted) == len(jobs) })
	w.until("every runner that ran them ended", func() bool { return len(w.status(unseenPool).Runners) == 0 })
	st := w.status(unseenPool)
	t.Logf("during the outage: %d runners ended before a message named them; %s", len(st.ScaleSet.Finished), w.describe(unseenPool))
	if len(st.ScaleSet.Finished) == 0 {
		t.Fatalf("every runner was named by a message before it ended; the test proves nothing (%s)", w.describe(unseenPool))
	}
	if st.Desired != 0 || st.Totals.Started != int64(len(jobs)) {
		t.Errorf("with the runners ended unseen: desired %d, started %d; want 0 and %d (%s)",
			st.Desired, st.Totals.Started, len(jobs), w.describe(unseenPool))
	}

	gh.EndActionsServiceOutage()
	inOutage = false
	w.until("the messages naming the runners taken", func() bool {
		st := w.status(unseenPool)
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0 && len(st.ScaleSet.Finished) == 0
	})
	if st := w.status(unseenPool); st.Totals.Started != int64(len(jobs)) {
		t.Errorf("started %d runners for %d jobs, want one per job", st.Totals.Started, len(jobs))
	}
	checkRanOnceEach(t, gh, jobs)
	if testworld.RecordingHistories() {
		w.record(workflows.PoolWorkflowID(unseenPool), "pool-scaleset-unseen")
		w.record(workflows.ScaleSetListenerWorkflowID(unseenPool, setID), "scaleset-listener-unseen")
	}
}

// scaleSetPoolYAML is one scale-set pool of the test, its jobs lasting work.
func scaleSetPoolYAML(name, labels, work string) string {
	return fmt.Sprintf(`
name: %s
organization: %s
labels: [%s]
scaleSet: {}
ephemeral: true
maxReplicas: 10
scaleDownDelay: 5s
namespace: %s
template:
  metadata:
    annotations:
      sim.runnerflow.dev/work-duration: %s
  spec:
    containers:
      - name: runner
        image: ghcr.io/actions/actions-runner:2.328.0
`, name, org, labels, demo.RunnerNamespace, work)
}

// queueJobs queues n jobs of the organization's repository with the labels.
func queueJobs(t *testing.T, gh *githubdouble.Server, labels []string, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		j, err := gh.QueueJob(githubdouble.JobSpec{Repository: org + "/app", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// delivered counts the jobs whose event of the action was delivered and answered.
func delivered(gh *githubdouble.Server, jobs []int64, action string) int {
	n := 0
	for _, d := range gh.Deliveries() {
		if d.Action == action && d.Done && d.StatusCode/100 == 2 && containsJob(jobs, d.JobID) {
			n++
		}
	}
	return n
}

// allDelivered reports whether every delivery was attempted (none parked, queued or in flight).
func allDelivered(gh *githubdouble.Server) bool {
	for _, d := range gh.Deliveries() {
		if !d.Done {
			return false
		}
	}
	return true
}

func containsJob(jobs []int64, id int64) bool {
	for _, j := range jobs {
		if j == id {
			return true
		}
	}
	return false
}

// jitMinted counts the JIT configurations the Actions service issued from scale sets.
func jitMinted(gh *githubdouble.Server) int {
	n := 0
	for k, c := range gh.ActionsServiceCalls() {
		if strings.Contains(k.Route, "generatejitconfig") && k.Status < 300 {
			n += c
		}
	}
	return n
}

// checkRanOnceEach: every job completed successfully, each on its own runner.
func checkRanOnceEach(t *testing.T, gh *githubdouble.Server, jobs []int64) {
	t.Helper()
	seen := map[string]int64{}
	for _, id := range jobs {
		j, _ := gh.Job(id)
		if j.Status != githubdouble.StatusCompleted || j.Conclusion != githubdouble.ConclusionSuccess || j.RunnerName == "" {
			t.Errorf("job %d: %s/%s on runner %q, want completed successfully on a runner", id, j.Status, j.Conclusion, j.RunnerName)
			continue
		}
		if other, ok := seen[j.RunnerName]; ok {
			t.Errorf("jobs %d and %d both ran on runner %s", other, id, j.RunnerName)
		}
		seen[j.RunnerName] = id
	}
}
