package workflows

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A job's completed event can reach the pool before its ephemeral runner's own end (the
// runner still cleans up), and even before the runner's busy report (a burst delays
// reports): the runner is leaving, so the lower desired count the event brings drains no
// runner that is still starting for another job, and no replacement is needed.
func TestCompletedJobsRunnerLeavesWithoutDrainingAStartingRunner(t *testing.T) {
	for _, tc := range []struct {
		canAfter     int
		busyReported bool
	}{{0, false}, {1, false}, {2, false}, {0, true}, {1, true}} {
		canAfter := tc.canAfter
		h := newPoolHarness(t, canAfter)
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
		spec.ScaleDownDelay = &metav1.Duration{Duration: 30 * time.Second}
		first, second, third := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2), RunnerName("linux", Generation(""), 3)
		h.silence(second) // still starting when the first job completes
		h.silence(third)
		h.at(time.Minute, func() { h.signal(SignalReservations, reserve(JobQueued, 1, 2, 3)) })
		h.at(time.Minute+30*time.Second, func() {
			if tc.busyReported {
				h.startJobsWithIDs(1)
			}
			inProgress := reserve(JobInProgress, 1)
			inProgress.Events[0].RunnerName = first
			h.signal(SignalReservations, inProgress)
		})
		// Long after the scale-down delay: the completed event, before the runner's end.
		h.at(3*time.Minute, func() {
			completed := reserve(JobCompleted, 1)
			completed.Events[0].RunnerName = first
			h.signal(SignalReservations, completed)
		})
		h.check(3*time.Minute+10*time.Second, "the finished runner leaving, the starting ones kept", func(st PoolStatus) bool {
			return st.Desired == 2 && len(st.Runners) == 3 && h.drainedSoFar() == 0
		})
		h.at(3*time.Minute+20*time.Second, func() { h.end(first, RunnerDone, EndReasonJobCompleted) })
		h.check(4*time.Minute, "two runners for the two waiting jobs", func(st PoolStatus) bool {
			return st.Desired == 2 && len(st.Runners) == 2
		})
		st := h.run(spec, 4*time.Minute+time.Second)
		if h.drainedSoFar() != 0 || st.Totals.Started != 3 {
			t.Errorf("[continue-as-new after %d, busy reported %v] drained %d, started %d runners for 3 jobs; want none drained, 3 started",
				canAfter, tc.busyReported, h.drainedSoFar(), st.Totals.Started)
		}
	}
}

// drainedSoFar is how many runners the pool has asked to drain.
func (h *poolHarness) drainedSoFar() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats.drained
}

// A runner can end (its pod succeeded) before the pool learns which job it ran, and its job's
// completed event can come before or after that end. Either way the job is over once: the
// pool counts neither the end nor the event a second time, so the desired count stays with
// the two jobs still waiting and scale-down drains none of their runners (one still
// starting). Across continue-as-new.
func TestAJobWhoseRunnerEndedUnnamedIsCountedOverOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		eventFirst bool
		canAfter   int
	}{{"end first", false, 0}, {"end first", false, 1}, {"event first", true, 0}, {"event first", true, 1}} {
		t.Run(fmt.Sprintf("%s, continue-as-new after %d", tc.name, tc.canAfter), func(t *testing.T) {
			h := newPoolHarness(t, tc.canAfter)
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			spec.ScaleDownDelay = &metav1.Duration{Duration: 30 * time.Second}
			first, third := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 3)
			h.silence(third) // still starting for a waiting job
			queued := reserve(JobQueued, 11, 12, 13)
			for i := range queued.Events {
				queued.Events[i].Repository = "acme/app"
			}
			h.at(time.Minute, func() { h.signal(SignalReservations, queued) })
			completed := reserve(JobCompleted, 11)
			completed.Events[0].RunnerName = first
			// Long after the scale-down delay, one second apart: within the settle time of a
			// check of reserved jobs, which would otherwise set the count right a moment later.
			end := func() { h.end(first, RunnerDone, EndReasonPodSucceeded) }
			event := func() { h.signal(SignalReservations, completed) }
			if tc.eventFirst {
				end, event = event, end
			}
			h.at(3*time.Minute, end)
			h.at(3*time.Minute+time.Second, event)
			h.check(3*time.Minute+3*time.Second, "two runners for the two waiting jobs, none drained", func(st PoolStatus) bool {
				return st.Desired == 2 && len(st.Runners) == 2 && h.drainedSoFar() == 0
			})
			st := h.run(spec, 4*time.Minute)
			if h.drainedSoFar() != 0 || st.Totals.Started != 3 {
				t.Errorf("drained %d, started %d runners for 3 jobs; want none drained, 3 started", h.drainedSoFar(), st.Totals.Started)
			}
		})
	}
}
