package workflows

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaleSetSim plays GitHub's side of a scale-set pool: EnsureScaleSet (set 5, then a new id
// each time the set is created again) and the listener, a double that only records its start.
type scaleSetSim struct {
	mu        sync.Mutex
	nextID    int64
	setID     int64
	ensured   []EnsureScaleSetInput
	listeners []string
}

func (s *scaleSetSim) ensure(_ context.Context, in EnsureScaleSetInput) (EnsureScaleSetOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensured = append(s.ensured, in)
	if s.setID == 0 {
		s.setID = s.nextID
		s.nextID++
		return EnsureScaleSetOutput{ScaleSetID: s.setID, Created: true}, nil
	}
	return EnsureScaleSetOutput{ScaleSetID: s.setID}, nil
}

// deleteAtGitHub plays GitHub deleting the set: the next ensure creates another.
func (s *scaleSetSim) deleteAtGitHub() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setID = 0
}

func (s *scaleSetSim) listener(ctx workflow.Context, in ScaleSetListenerInput) (ScaleSetListenerResult, error) {
	s.mu.Lock()
	s.listeners = append(s.listeners, fmt.Sprintf("%s max=%d", workflow.GetInfo(ctx).WorkflowExecution.ID, in.MaxCapacity))
	s.mu.Unlock()
	return ScaleSetListenerResult{}, workflow.Await(ctx, func() bool { return false })
}

func (s *scaleSetSim) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.listeners)
}

func scaleSetMessage(set, id int64, assigned int, events ...ScaleSetJobEvent) ScaleSetMessageSignal {
	return ScaleSetMessageSignal{ScaleSetID: set, SessionID: "s1", Message: ScaleSetMessage{
		ID: id, Statistics: ScaleSetStatistics{AssignedJobs: assigned}, Jobs: events,
	}}
}

func jobEvent(event string, ids ...int64) []ScaleSetJobEvent {
	var out []ScaleSetJobEvent
	for _, id := range ids {
		out = append(out, ScaleSetJobEvent{Event: event, RunnerRequestID: id})
	}
	return out
}

// scaleSetPoolScenario: a scale-set pool creates its set and starts one listener for it; the
// set's messages (one of them delivered twice) bring runners for its jobs and take the pool
// back to zero; a set GitHub deleted is created again with a listener of its own, and a
// message of the old set changes nothing.
func scaleSetPoolScenario(h *poolHarness, sim *scaleSetSim) (PoolSpec, time.Duration) {
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas = 0, ptr(3)
	spec.ScaleDownDelay = &metav1.Duration{Duration: time.Minute}
	spec.ScaleSet = &ScaleSetSpec{}
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(sim.ensure, activity.RegisterOptions{Name: ActivityEnsureScaleSet})
		h.env.RegisterWorkflowWithOptions(sim.listener, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
	}
	h.check(30*time.Second, "the set created and listened to, no runner without jobs", func(st PoolStatus) bool {
		return st.ScaleSet != nil && st.ScaleSet.ScaleSetID == 5 && st.ScaleSet.Listening && len(st.Runners) == 0
	})
	h.at(time.Minute, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 2, jobEvent(ScaleSetJobAssigned, 1, 2)...))
	})
	h.at(time.Minute+time.Second, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 2, jobEvent(ScaleSetJobAssigned, 1, 2)...))
	})
	h.check(2*time.Minute, "a runner per job, the redelivered message counted once", func(st PoolStatus) bool {
		return st.Desired == 2 && len(st.Runners) == 2 && st.ScaleSet.Ledger.LastMessageID == 1 && st.ScaleSet.SessionID == "s1"
	})
	var busy []string
	h.at(2*time.Minute+time.Second, func() { busy = h.startJobsWithIDs(1, 2) })
	h.at(2*time.Minute+2*time.Second, func() {
		started := jobEvent(ScaleSetJobStarted, 1, 2)
		for i := range started {
			started[i].RunnerName = busy[i]
		}
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 2, 2, started...))
	})
	h.at(3*time.Minute, func() { h.finishJobs(busy) })
	// The completed message comes after the runners left: no runner is started for it.
	h.at(3*time.Minute+45*time.Second, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 3, 0, jobEvent(ScaleSetJobCompleted, 1, 2)...))
	})
	h.check(5*time.Minute, "back to zero", func(st PoolStatus) bool { return st.Desired == 0 && len(st.Runners) == 0 })
	h.at(6*time.Minute, func() {
		sim.deleteAtGitHub()
		h.signal(SignalScaleSetListenerEnded, ScaleSetListenerEnded{ScaleSetID: 5, Gone: true, Reason: "gone"})
	})
	h.at(6*time.Minute+30*time.Second, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 4, 3, jobEvent(ScaleSetJobAssigned, 7, 8, 9)...))
	})
	h.check(7*time.Minute, "the set created again and listened to; the old set's message ignored", func(st PoolStatus) bool {
		return st.ScaleSet.ScaleSetID == 6 && st.ScaleSet.Listening && st.ScaleSet.Recreated == 1 && st.Desired == 0
	})
	return spec, 7*time.Minute + 30*time.Second
}

func TestScaleSetPoolFollowsItsSetAcrossContinueAsNew(t *testing.T) {
	scaleSetsServed = true
	t.Cleanup(func() { scaleSetsServed = false })
	var baseline string
	for _, canAfter := range []int{0, 1, 2, 3, 5} {
		sim := &scaleSetSim{nextID: 5}
		h := newPoolHarness(t, canAfter)
		spec, end := scaleSetPoolScenario(h, sim)
		st := h.run(spec, end)
		if st.Totals.Started != 2 {
			t.Errorf("[continue-as-new after %d] started %d runners, want one per job: 2", canAfter, st.Totals.Started)
		}
		want := []string{"scaleset-listener/linux/5 max=3", "scaleset-listener/linux/6 max=3"}
		if got := sim.started(); !slices.Equal(got, want) {
			t.Errorf("[continue-as-new after %d] listeners started %q, want %q: one per set", canAfter, got, want)
		}
		for _, in := range sim.ensured {
			if in.Name != "linux" || in.Scope.Organization != "acme" || !slices.Equal(in.Labels, spec.Labels) {
				t.Errorf("[continue-as-new after %d] ensured %+v, want the pool's name, scope and labels", canAfter, in)
			}
		}
		fp := fingerprint(st, h.stats)
		if canAfter == 0 {
			baseline = fp
			continue
		}
		if fp != baseline {
			t.Errorf("continue-as-new after %d ends differently:\n%s\nstraight through:\n%s", canAfter, fp, baseline)
		}
	}
}
