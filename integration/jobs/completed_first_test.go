package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

const donePool = "xc-done"

// TestCompletedEventBeforeTheRunnerEnds: the jobs complete while the API server is paused, so
// their completed webhooks reach the pool while the runners that ran them cannot end (their
// pods' end is not seen). The pool counts each named runner as leaving at once (jobDone) and
// starts no runner for the lower count, and once the API server is back the runners end and
// the pool is at zero with one runner per job. A job that started late may leave the others
// time to finish before the pause: only the runners still running a job at the pause are
// looked for.
func TestCompletedEventBeforeTheRunnerEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sys := startSystem(t, ctx, poolYAML(donePool, "self-hosted, linux, done"))
	defer sys.Stop()
	gh := sys.World.GitHub
	var jobs []int64
	for range 3 {
		j, err := gh.QueueJob(githubdouble.JobSpec{Repository: org + "/app", Labels: []string{"self-hosted", "linux", "done"}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j.ID)
	}
	w := waiter{t: t, ctx: ctx, sys: sys, pools: []string{donePool}}
	w.until("every job started", func() bool { return w.count(jobs, githubdouble.StatusQueued) == 0 })

	// The jobs still running at the pause are the ones whose completed events come before
	// their runners can end (a job that started late may leave the others time to finish).
	kube := sys.World.Kube
	if err := kube.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = kube.ResumeAPIServer()
		}
	}()
	running := map[string]bool{}
	for _, id := range jobs {
		if j, _ := gh.Job(id); j.Status == githubdouble.StatusInProgress {
			running[j.RunnerName] = true
		}
	}
	if len(running) == 0 {
		t.Fatal("every job completed before the API server paused; the test proves nothing")
	}
	w.until("every job completed at GitHub", func() bool { return w.count(jobs, githubdouble.StatusCompleted) == len(jobs) })
	w.until("the pool counting the runners that ran them as leaving", func() bool {
		st := w.status(donePool)
		done := 0
		for _, r := range st.Runners {
			if r.JobDone && running[r.Name] {
				done++
			}
		}
		return done == len(running) && st.Reservations == 0
	})
	st := w.status(donePool)
	if st.Desired != 0 || st.Totals.Started != int64(len(jobs)) {
		t.Errorf("with the finished runners not yet ended: desired %d, started %d; want 0 and %d (%s)",
			st.Desired, st.Totals.Started, len(jobs), w.describe(donePool))
	}
	if err := kube.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	paused = false
	w.until("the pool at zero", func() bool { return w.idle(donePool) })
	if st := w.status(donePool); st.Totals.Started != int64(len(jobs)) {
		t.Errorf("started %d runners for %d jobs, want one per job", st.Totals.Started, len(jobs))
	}
	if testworld.RecordingHistories() {
		w.record(workflows.PoolWorkflowID(donePool), "pool-completed-first")
	}
}
