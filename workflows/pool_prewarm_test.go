package workflows

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pool's prewarming, played in the harness: earlier runs of the workflow teach it lint's
// (2 min), test's (4 min) and build's (3 min) run times; then a run's lint and test are queued
// at 10:00 and taken by the pool's runners at 10:30, so build is predicted at 14:30 (test's
// start plus its run time) and its runner starts at 14:00, 30 s ahead (PrewarmStartLatency).

// prewarmSim plays GitHub's side of the reads: ReadRunGraph's answers, counted.
type prewarmSim struct {
	reads []ReadRunGraphInput
}

// prewarmTestGraph is the workflow's file: lint and test, then build.
func prewarmTestGraph() RunGraph {
	labels := []string{"self-hosted", "linux"}
	return RunGraph{Jobs: []RunGraphJob{
		{ID: "lint", Labels: labels, LabelsKnown: true, Instances: 1},
		{ID: "test", Labels: labels, LabelsKnown: true, Instances: 1},
		{ID: "build", Needs: []string{"lint", "test"}, Labels: labels, LabelsKnown: true, Instances: 1},
	}}
}

func (h *poolHarness) readRunGraph(_ context.Context, in ReadRunGraphInput) (ReadRunGraphResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prewarm.reads = append(h.prewarm.reads, in)
	g := prewarmTestGraph()
	return ReadRunGraphResult{Graph: &g, Path: ".github/workflows/ci.yml", Calls: 2}, nil
}

func (h *poolHarness) graphReads() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.prewarm.reads)
}

// runJobEvent is one job event of run runID, as the intake hands it to the pool.
func runJobEvent(action string, runID, jobID int64, name string) WorkflowJobEvent {
	return WorkflowJobEvent{
		DeliveryID: fmt.Sprintf("%s-%d", action, jobID), JobID: jobID, RunID: runID, Action: action,
		Repository: "acme/app", HeadSHA: fmt.Sprintf("sha-%d", runID), WorkflowName: "CI", JobName: name,
		Labels: []string{"self-hosted", "linux"},
	}
}

// runJobDone is a job's completed event, with GitHub's start and end.
func runJobDone(runID, jobID int64, name string, started, done time.Time, conclusion string) WorkflowJobEvent {
	ev := runJobEvent(JobCompleted, runID, jobID, name)
	ev.StartedAt, ev.CompletedAt, ev.Conclusion = started, done, conclusion
	return ev
}

// prewarmScenario sets the pool up: prewarm on (or not), five earlier runs at 1:00, the run
// at 10:00 with lint and test taken at 10:30. It returns the spec and the runners that took
// lint and test (filled at 10:30).
func prewarmScenario(h *poolHarness, on bool) (PoolSpec, *[]string) {
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas = 0, ptr(10)
	if on {
		spec.Prewarm = &PrewarmSpec{Enabled: true, Grace: &metav1.Duration{Duration: 2 * time.Minute}}
	}
	segment := h.onSegment
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(h.readRunGraph, activity.RegisterOptions{Name: ActivityReadRunGraph})
		if segment != nil {
			segment()
		}
	}
	h.at(time.Minute, func() {
		var earlier ReservationBatch
		for run := int64(1); run <= 5; run++ {
			t0 := h.start.Add(-time.Hour + time.Duration(run)*10*time.Minute)
			earlier.Events = append(earlier.Events,
				runJobDone(run, run*10+1, "lint", t0, t0.Add(2*time.Minute), "success"),
				runJobDone(run, run*10+2, "test", t0, t0.Add(4*time.Minute), "success"),
				runJobDone(run, run*10+3, "build", t0.Add(4*time.Minute), t0.Add(7*time.Minute), "success"))
		}
		h.update("earlier runs", UpdateReservations, earlier)
	})
	h.at(10*time.Minute, func() {
		h.update("run queued", UpdateReservations, ReservationBatch{Events: []WorkflowJobEvent{
			runJobEvent(JobQueued, 100, 101, "lint"), runJobEvent(JobQueued, 100, 102, "test"),
		}})
	})
	var upstream []string
	h.at(10*time.Minute+30*time.Second, func() { upstream = h.startJobsWithIDs(101, 102) })
	h.check(13*time.Minute+50*time.Second, "only lint's and test's runners before build's is due", func(st PoolStatus) bool {
		return st.Totals.Started == 2 && st.Predicted == 0
	})
	return spec, &upstream
}

// warmedRunner is the runner started third: the one warmed for build.
func (h *poolHarness) warmedRunner() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.inputs) < 3 {
		return ""
	}
	return h.inputs[2].Name
}

func runnerNamed(st PoolStatus, name string) (PoolRunner, bool) {
	i := slices.IndexFunc(st.Runners, func(r PoolRunner) bool { return r.Name == name })
	if i < 0 {
		return PoolRunner{}, false
	}
	return st.Runners[i], true
}

// TestPrewarmWarmsBeforeTheJobIsQueued: build's runner starts before build is queued and is
// online when it is; the queued build takes it (no runner started for it then: one runner per
// job); each run's graph is read once. Across continue-as-new the end is the same.
func TestPrewarmWarmsBeforeTheJobIsQueued(t *testing.T) {
	var baseline string
	for _, canAfter := range []int{0, 2, 5} {
		h := newPoolHarness(t, canAfter)
		rec := newCounterRecorder()
		h.metrics = rec
		spec, upstream := prewarmScenario(h, true)
		h.check(14*time.Minute+10*time.Second, "a runner started for build before it is queued", func(st PoolStatus) bool {
			return st.Totals.Started == 3 && st.Predicted == 1 && st.Reservations == 2
		})
		h.check(14*time.Minute+29*time.Second, "build's runner online before build is queued", func(st PoolStatus) bool {
			r, ok := runnerNamed(st, h.warmedRunner())
			return ok && r.State == RunnerIdle && !r.Draining
		})
		h.at(14*time.Minute+30*time.Second, func() { h.finishJobs(*upstream) })
		h.at(14*time.Minute+31*time.Second, func() {
			done := h.start.Add(14*time.Minute + 30*time.Second)
			took := h.start.Add(10*time.Minute + 30*time.Second)
			h.update("build queued", UpdateReservations, ReservationBatch{Events: []WorkflowJobEvent{
				runJobDone(100, 101, "lint", took, done, "success"),
				runJobDone(100, 102, "test", took, done, "success"),
				runJobEvent(JobQueued, 100, 103, "build"),
			}})
		})
		h.at(14*time.Minute+32*time.Second, func() { h.startJobsWithIDs(103) })
		h.check(14*time.Minute+40*time.Second, "build runs on the warmed runner, no runner started for it after it was queued", func(st PoolStatus) bool {
			r, ok := runnerNamed(st, h.warmedRunner())
			return ok && r.State == RunnerBusy && r.JobID == 103 && st.Totals.Started == 3 && st.Predicted == 0 && st.Reservations == 1
		})
		end := h.run(spec, 15*time.Minute)
		if reads := h.graphReads(); reads != 6 {
			t.Errorf("[continue-as-new after %d] %d graph reads, want one per run (6)", canAfter, reads)
		}
		// The five earlier runs are read together, each by its run first; the sixth is read at
		// the path they taught the pool (one call), after the continue-as-new too.
		for _, in := range h.prewarm.reads {
			want := ""
			if in.RunID == 100 {
				want = ".github/workflows/ci.yml"
			}
			if in.Path != want {
				t.Errorf("[continue-as-new after %d] run %d read at path %q, want %q", canAfter, in.RunID, in.Path, want)
			}
		}
		if got, want := rec.prewarmCounts(), map[string]int64{
			"runnerflow_pool_prewarm_predicted_runners{pool=linux}": 1, "runnerflow_pool_prewarm_taken_runners{pool=linux}": 1,
		}; !maps.Equal(got, want) {
			t.Errorf("[continue-as-new after %d] prewarm counters %v, want %v: build's runner made and taken, once", canAfter, got, want)
		}
		fp := fingerprint(end, h.stats)
		if canAfter == 0 {
			baseline = fp
		} else if fp != baseline {
			t.Errorf("continue-as-new after %d ends differently:\n%s\nstraight through:\n%s", canAfter, fp, baseline)
		}
	}
}

// TestPrewarmReleasesWhenTheUpstreamFails: test fails at 14:15, so build will be skipped: its
// warmed runner is drained at once, though the scale-down delay (10 min after the 14:00
// scale-out) holds any other scale-down.
func TestPrewarmReleasesWhenTheUpstreamFails(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec, upstream := prewarmScenario(h, true)
	h.check(14*time.Minute+10*time.Second, "a runner started for build", func(st PoolStatus) bool {
		return st.Totals.Started == 3 && st.Predicted == 1
	})
	h.at(14*time.Minute+15*time.Second, func() {
		h.finishJobs((*upstream)[1:])
		took := h.start.Add(10*time.Minute + 30*time.Second)
		h.update("test failed", UpdateReservations, ReservationBatch{Events: []WorkflowJobEvent{
			runJobDone(100, 102, "test", took, h.start.Add(14*time.Minute+15*time.Second), "failure"),
		}})
	})
	h.check(14*time.Minute+25*time.Second, "build's runner let go, nothing predicted", func(st PoolStatus) bool {
		r, ok := runnerNamed(st, h.warmedRunner())
		return (!ok || r.Draining || r.State == RunnerDraining) && st.Predicted == 0 && st.Totals.Started == 3
	})
	h.run(spec, 15*time.Minute)
}

// TestPrewarmReleasesAMissedPrediction: lint and test run on past their prediction; build's
// runner waits for it until 16:30 (due 14:30, grace 2 min), then goes, and is not warmed
// again for the same job.
func TestPrewarmReleasesAMissedPrediction(t *testing.T) {
	h := newPoolHarness(t, 0)
	rec := newCounterRecorder()
	h.metrics = rec
	spec, _ := prewarmScenario(h, true)
	h.check(16*time.Minute+20*time.Second, "build's runner kept within the grace", func(st PoolStatus) bool {
		r, ok := runnerNamed(st, h.warmedRunner())
		return ok && r.State == RunnerIdle && !r.Draining && st.Predicted == 1
	})
	h.check(16*time.Minute+40*time.Second, "build's runner let go after the grace", func(st PoolStatus) bool {
		r, ok := runnerNamed(st, h.warmedRunner())
		return (!ok || r.Draining || r.State == RunnerDraining) && st.Predicted == 0
	})
	h.check(19*time.Minute, "not warmed again for the same job", func(st PoolStatus) bool {
		return st.Totals.Started == 3 && st.Predicted == 0
	})
	h.run(spec, 20*time.Minute)
	// Warmed at 14:00, given up at 16:30: one runner, 150 runner-seconds (the harness's
	// instants are a few microseconds apart, so 149 whole seconds and the rest kept).
	got := rec.prewarmCounts()
	secs := got["runnerflow_pool_prewarm_wasted_runner_seconds{pool=linux,reason=missed}"]
	delete(got, "runnerflow_pool_prewarm_wasted_runner_seconds{pool=linux,reason=missed}")
	if want := map[string]int64{
		"runnerflow_pool_prewarm_predicted_runners{pool=linux}":            1,
		"runnerflow_pool_prewarm_wasted_runners{pool=linux,reason=missed}": 1,
	}; !maps.Equal(got, want) || secs < 149 || secs > 150 {
		t.Errorf("prewarm counters %v and %d wasted runner-seconds, want %v and 150", got, secs, want)
	}
}

// TestPrewarmGate: a pool whose history took the branch before changePrewarm (prewarm on in
// its spec, the change not in force) reads no graph and warms nothing; a pool without prewarm
// does the same and never asks the change, so its history carries no marker.
func TestPrewarmGate(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   bool
	}{{"prewarm on, before the change", true}, {"prewarm off", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newPoolHarness(t, 0)
			asked := 0
			h.onSegment = func() {
				h.env.OnGetVersion(changePrewarm, workflow.DefaultVersion, 1).
					Run(func(mock.Arguments) { asked++ }).Return(workflow.DefaultVersion)
			}
			spec, _ := prewarmScenario(h, tc.on)
			h.check(14*time.Minute+40*time.Second, "no runner started ahead of build", func(st PoolStatus) bool {
				return st.Totals.Started == 2 && st.Predicted == 0
			})
			h.run(spec, 15*time.Minute)
			if reads := h.graphReads(); reads != 0 {
				t.Errorf("%d graph reads, want none", reads)
			}
			if tc.on && asked == 0 {
				t.Error("the change was never asked of a pool with prewarm on")
			}
			if !tc.on && asked != 0 {
				t.Errorf("the change was asked %d times of a pool without prewarm", asked)
			}
		})
	}
}

// TestPrewarmMeasuresItsStartLatency: a prewarming pool starts runners its declared default
// ahead until it has measured five of its own starts (the harness's runners are online 20 s
// after the pool starts them); a pool that does not prewarm measures nothing.
func TestPrewarmMeasuresItsStartLatency(t *testing.T) {
	for _, on := range []bool{true, false} {
		h := newPoolHarness(t, 0)
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas = 0, ptr(10)
		if on {
			spec.Prewarm = &PrewarmSpec{Enabled: true}
		}
		want := func(d time.Duration) func(PoolStatus) bool {
			return func(st PoolStatus) bool {
				if !on {
					return st.PrewarmLead == 0
				}
				return st.PrewarmLead >= d && st.PrewarmLead < d+time.Second
			}
		}
		h.check(30*time.Second, "the declared default before any start", want(PrewarmStartLatency))
		h.at(time.Minute, func() { h.update("burst", UpdateReservations, reserve(JobQueued, 1, 2, 3, 4, 5)) })
		h.check(2*time.Minute, "the measured starts after five", want(20*time.Second))
		h.run(spec, 3*time.Minute)
	}
}
