package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	// outageRuns: the intake is down for 30 minutes, six reconcile intervals of 5 minutes;
	// time is compressed by triggering each run by hand, as an operator would.
	outageRuns = 6
	// doubleHookID is the id of the GitHub double's one webhook (X-GitHub-Hook-ID), which it
	// also serves as each organization's hook.
	doubleHookID = 1
	// reconcileGrace keeps the reconcile runs' orphan look short.
	reconcileGrace = 2 * time.Second
)

// TestIntakeDownHalfAnHourLosesNothing: the webhook intake is down for half an hour, six
// reconcile intervals (each run triggered, as an operator would, instead of waiting), and a
// job is queued in each: GitHub's queued deliveries fail and no runner starts (GitHub never
// redelivers by itself). Each run meets a hook whose newest delivery failed and probes it with
// GitHub's ping, spending none of the failed events (before, each run redelivered one of them
// into the intake still down, and that event was never tried again: all six jobs were lost).
// The intake comes back: the next run's ping is answered, the run after it redelivers every
// failed event once. Every job then runs once on its own runner, nothing is left behind, and a
// last run finds nothing to redeliver.
func TestIntakeDownHalfAnHourLosesNothing(t *testing.T) {
	s := newSystem(t, "fa-redeliver")
	front := startIntakeFront(t, s.intake.Routes())
	world.GitHub.SetWebhookURL(front.url())
	s.apply(workFor(2*time.Second), nil)
	hook := workflows.HookRef{Organization: s.org, ID: doubleHookID}
	cfg := workerapp.ReconcileConfig{Interval: time.Hour, Grace: reconcileGrace, Hook: hook}
	ctx := context.Background()
	if _, err := workerapp.EnsureReconcileSchedule(ctx, s.c, cfg, s.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Delete(ctx) })

	front.down()
	var jobs []int64
	for run := 1; run <= outageRuns; run++ {
		jobs = append(jobs, s.queueJobs(1)...)
		s.eventually("the queued deliveries failed", func() bool { return failedQueued(jobs) == len(jobs) })
		r := s.triggerReconcile()
		checkRedeliveries(t, fmt.Sprintf("run %d of the outage", run), r, run, 0, true)
		if r.Deliveries.ProbeBy != workflows.ProbePing || r.Deliveries.Deferred != run {
			t.Fatalf("run %d of the outage probed by %q and deferred %d; want a ping and all %d failed events kept",
				run, r.Deliveries.ProbeBy, r.Deliveries.Deferred, run)
		}
		s.waitForDeliveries()
	}
	front.up()
	if n := count(jobs, githubdouble.StatusQueued); n != len(jobs) {
		t.Fatalf("%d of %d jobs queued after the outage; want all: no event reached runnerflow", n, len(jobs))
	}

	probe := s.triggerReconcile()
	checkRedeliveries(t, "the first run after the outage", probe, outageRuns, 0, true)
	s.waitForDeliveries()
	rest := s.triggerReconcile()
	checkRedeliveries(t, "the second run after the outage", rest, outageRuns, outageRuns, false)
	if testworld.RecordingHistories() {
		path, err := world.Temporal.RecordHistory(s.lastReconcile, "", "reconcile-redeliver")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", path)
	}
	s.checkAllClean(jobs)
	s.waitForDeliveries()
	last := s.triggerReconcile()
	checkRedeliveries(t, "the last run", last, 0, 0, false)
	if last.Deliveries != nil && len(last.Deliveries.Remembered) != outageRuns {
		t.Errorf("the last run remembers %d redelivered events, want the %d of the outage", len(last.Deliveries.Remembered), outageRuns)
	}
	redelivered := map[string]int{}
	for _, d := range world.GitHub.Deliveries() {
		if d.Redelivery && containsJob(jobs, d.JobID) {
			redelivered[d.ID]++
		}
	}
	for guid, n := range redelivered {
		if n > 1 {
			t.Errorf("event %s redelivered %d times, want at most once", guid, n)
		}
	}
	if len(redelivered) != outageRuns {
		t.Errorf("%d events redelivered, want the %d failed queued events", len(redelivered), outageRuns)
	}
}

// failedQueued counts the jobs whose queued delivery failed without an answer.
func failedQueued(jobs []int64) int {
	failed := 0
	for _, d := range world.GitHub.Deliveries() {
		if d.Action == "queued" && d.Done && d.StatusCode == 0 && containsJob(jobs, d.JobID) {
			failed++
		}
	}
	return failed
}

// checkRedeliveries holds a run's report to the failed events it found, the redeliveries GitHub
// accepted, and whether it only probed the hook.
func checkRedeliveries(t *testing.T, run string, r workflows.ReconcileReport, failed, redelivered int, probe bool) {
	t.Helper()
	d := r.Deliveries
	if d == nil {
		t.Fatalf("%s reports no redelivery: %+v", run, r)
	}
	t.Logf("%s: %d attempts listed, %d failed events, %d redelivered, %d already, %d deferred, probe %t",
		run, d.Listed, d.Failed, d.Redelivered, d.AlreadyRedelivered, d.Deferred, d.Probe)
	if d.Error != "" || d.Failed != failed || d.Redelivered != redelivered || d.Probe != probe || len(d.Redeliveries) != redelivered {
		t.Errorf("%s: %d failed events, %d redelivered, probe %t (error %q, redeliveries %+v); want %d, %d, %t",
			run, d.Failed, d.Redelivered, d.Probe, d.Error, d.Redeliveries, failed, redelivered, probe)
	}
}

// triggerReconcile runs the Schedule's action now (`temporal schedule trigger`) and waits for
// the run's report.
func (s *system) triggerReconcile() workflows.ReconcileReport {
	s.t.Helper()
	ctx := context.Background()
	h := s.c.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID)
	before, err := h.Describe(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		s.t.Fatal(err)
	}
	var id string
	s.eventually("the triggered reconcile started", func() bool {
		d, err := h.Describe(ctx)
		if err != nil || len(d.Info.RecentActions) <= len(before.Info.RecentActions) {
			return false
		}
		id = d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult.WorkflowID
		return true
	})
	var report workflows.ReconcileReport
	if err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &report); err != nil {
		s.t.Fatal(err)
	}
	s.lastReconcile = id
	return report
}

// waitForDeliveries waits until the double has made every delivery it queued (the
// redeliveries GitHub accepted included), so the next run lists their answers.
func (s *system) waitForDeliveries() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	if err := world.GitHub.WaitForDeliveries(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// intakeFront serves the intake on an address of its own and can take it down: while down,
// every request's connection is closed before any answer, as GitHub sees an intake whose pods
// are gone (GitHub records no status code). The address stays the test's own throughout, so no
// other process can take it during the outage.
type intakeFront struct {
	srv      *httptest.Server
	stopping atomic.Bool
}

func startIntakeFront(t *testing.T, h http.Handler) *intakeFront {
	t.Helper()
	f := &intakeFront{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.stopping.Load() {
			h.ServeHTTP(w, r)
			return
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *intakeFront) url() string { return f.srv.URL + "/webhook" }

// down makes every later request fail without an answer.
func (f *intakeFront) down() { f.stopping.Store(true) }

// up serves the intake again.
func (f *intakeFront) up() { f.stopping.Store(false) }
