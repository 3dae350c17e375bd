package faults

import (
	"context"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// droppedShare is the share of workflow_job deliveries GitHub fails during the burst.
const droppedShare = 0.2

// TestDroppedDeliveriesConvergeWithinAReconcile: GitHub fails a fifth of the workflow_job
// deliveries of a 20-job burst (queued, in_progress and completed alike). A job whose queued
// event arrived gets its runner; a runner whose in_progress and completed events were lost ends
// with its pod and its pool learns the job's end from GitHub (the reserved-job check), starting
// no runner for it. One run of the reconcile Schedule afterwards redelivers the failed events:
// the jobs whose queued event was lost get their runners. Every job runs once, one runner per
// job, the pool at rest, nothing left behind.
func TestDroppedDeliveriesConvergeWithinAReconcile(t *testing.T) {
	s := newSystem(t, "fa-dropped")
	s.apply(workFor(2*time.Second), nil)
	cfg := workerapp.ReconcileConfig{Interval: time.Hour, Grace: reconcileGrace, Hook: workflows.HookRef{Organization: s.org, ID: doubleHookID}}
	ctx := context.Background()
	if _, err := workerapp.EnsureReconcileSchedule(ctx, s.c, cfg, s.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Delete(ctx) })

	world.GitHub.DropWebhooks(droppedShare)
	t.Cleanup(func() { world.GitHub.DropWebhooks(0) })
	jobs := s.queueJobs(20)
	s.waitForDeliveries() // every queued event delivered or failed
	s.eventually("every job whose queued event arrived has run", func() bool {
		for _, id := range jobs {
			if queuedDelivered(id) {
				if j, _ := world.GitHub.Job(id); j.Status != githubdouble.StatusCompleted {
					return false
				}
			}
		}
		return true
	})
	world.GitHub.DropWebhooks(0)
	s.waitForDeliveries()
	dropped, lostQueued := 0, 0
	for _, d := range world.GitHub.Deliveries() {
		if containsJob(jobs, d.JobID) && d.Done && d.StatusCode == 0 {
			dropped++
			if d.Action == "queued" {
				lostQueued++
			}
		}
	}
	t.Logf("%d deliveries failed, %d of them queued events; %d jobs done before the reconcile; pool: %s",
		dropped, lostQueued, count(jobs, githubdouble.StatusCompleted), s.describe())
	if lostQueued == 0 || dropped == lostQueued {
		t.Fatalf("%d deliveries failed, %d of them queued events: want both queued and later events lost", dropped, lostQueued)
	}
	report := s.triggerReconcile()
	if report.Deliveries == nil || report.Deliveries.Error != "" {
		t.Fatalf("the reconcile run did not redeliver: %+v", report.Deliveries)
	}
	if report.Deliveries.Probe {
		// The hook's last answer was a failure, so the run redelivered one event to see
		// whether the intake answers again; the next run sends the rest (what an operator
		// who triggers the Schedule after an outage is told to do twice).
		s.waitForDeliveries()
		report = s.triggerReconcile()
	}
	t.Logf("redelivered %d failed events", report.Deliveries.Redelivered)
	s.checkAllClean(jobs)
}

// queuedDelivered reports whether the job's queued event reached the intake.
func queuedDelivered(job int64) bool {
	for _, d := range world.GitHub.Deliveries() {
		if d.JobID == job && d.Action == "queued" && d.StatusCode >= 200 && d.StatusCode <= 299 {
			return true
		}
	}
	return false
}
