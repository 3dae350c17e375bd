package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaleSetSim plays GitHub's side of a scale-set pool: EnsureScaleSet (set 5, then a new id
// each time the set is created again) and the listener, a double that only records its start.
type scaleSetSim struct {
	mu        sync.Mutex
	nextID    int64
	sets      map[string]int64
	deleted   []int64
	ensured   []EnsureScaleSetInput
	listeners []string
	// told are the maxima listeners were sent (SignalScaleSetCapacity), by listener id.
	told []string
}

// tell records a maximum sent to a listener.
func (s *scaleSetSim) tell(_, workflowID, _, _ string, arg any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, fmt.Sprintf("%s max=%d", workflowID, arg.(ScaleSetCapacity).MaxCapacity))
	return nil
}

func (s *scaleSetSim) ensure(_ context.Context, in EnsureScaleSetInput) (EnsureScaleSetOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensured = append(s.ensured, in)
	if s.sets == nil {
		s.sets = map[string]int64{}
	}
	if id, ok := s.sets[in.Name]; ok {
		return EnsureScaleSetOutput{ScaleSetID: id}, nil
	}
	s.sets[in.Name] = s.nextID
	s.nextID++
	return EnsureScaleSetOutput{ScaleSetID: s.sets[in.Name], Created: true}, nil
}

func (s *scaleSetSim) delete(_ context.Context, in DeleteScaleSetInput) (DeleteScaleSetOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, in.ScaleSetID)
	return DeleteScaleSetOutput{Deleted: true}, nil
}

// deleteAtGitHub plays GitHub deleting the set: the next ensure creates another.
func (s *scaleSetSim) deleteAtGitHub() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sets = nil
}

func (s *scaleSetSim) listener(ctx workflow.Context, in ScaleSetListenerInput) (ScaleSetListenerResult, error) {
	s.mu.Lock()
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	s.listeners = append(s.listeners, fmt.Sprintf("%s max=%d", id, in.MaxCapacity))
	s.mu.Unlock()
	// A listener started by this run of the pool gets its signals here; one started by an
	// earlier run, through the environment's external-signal mock (tell).
	capacity := workflow.GetSignalChannel(ctx, SignalScaleSetCapacity)
	for {
		var c ScaleSetCapacity
		capacity.Receive(ctx, &c)
		if ctx.Err() != nil {
			return ScaleSetListenerResult{}, ctx.Err()
		}
		_ = s.tell("", id, "", "", c)
	}
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
		h.env.RegisterActivityWithOptions(sim.delete, activity.RegisterOptions{Name: ActivityDeleteScaleSet})
		h.env.RegisterWorkflowWithOptions(sim.listener, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
		h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalScaleSetCapacity, mock.Anything).Return(sim.tell)
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
	bigger := spec
	bigger.MaxReplicas = ptr(4)
	h.at(5*time.Minute+time.Second, func() { h.update("max", UpdateApply, ApplyRequest{Spec: bigger}) })
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
	var baseline string
	for _, canAfter := range []int{0, 1, 2, 3, 5} {
		sim := &scaleSetSim{nextID: 5}
		h := newPoolHarness(t, canAfter)
		spec, end := scaleSetPoolScenario(h, sim)
		st := h.run(spec, end)
		if st.Totals.Started != 2 {
			t.Errorf("[continue-as-new after %d] started %d runners, want one per job: 2", canAfter, st.Totals.Started)
		}
		want := []string{"scaleset-listener/linux/5 max=3", "scaleset-listener/linux/6 max=4"}
		if got := sim.started(); !slices.Equal(got, want) {
			t.Errorf("[continue-as-new after %d] listeners started %q, want %q: one per set, with the maximum in force", canAfter, got, want)
		}
		if want := []string{"scaleset-listener/linux/5 max=4"}; !slices.Equal(sim.told, want) {
			t.Errorf("[continue-as-new after %d] listeners told %q, want %q: the applied maximum, once", canAfter, sim.told, want)
		}
		for _, in := range h.inputs {
			if in.Spec.ScaleSetID != 5 {
				t.Errorf("[continue-as-new after %d] runner %s started for set %d, want 5", canAfter, in.Name, in.Spec.ScaleSetID)
			}
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

// A spec that names another set moves the pool to it: the old set's listener is cancelled and
// the old set deleted (unless keepOnDelete); a pool cannot become or stop being a scale set's.
func TestScaleSetPoolMovesToTheSetItsSpecNames(t *testing.T) {
	for _, keep := range []bool{false, true} {
		sim := &scaleSetSim{nextID: 5}
		h := newPoolHarness(t, 0)
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas = 0, ptr(3)
		spec.ScaleSet = &ScaleSetSpec{KeepOnDelete: keep}
		h.onSegment = func() {
			h.env.RegisterActivityWithOptions(sim.ensure, activity.RegisterOptions{Name: ActivityEnsureScaleSet})
			h.env.RegisterActivityWithOptions(sim.delete, activity.RegisterOptions{Name: ActivityDeleteScaleSet})
			h.env.RegisterWorkflowWithOptions(sim.listener, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
		}
		renamed := spec
		renamed.ScaleSet = &ScaleSetSpec{Name: "linux-big", KeepOnDelete: keep}
		plain := spec
		plain.ScaleSet = nil
		h.at(time.Minute, func() { h.update("rename", UpdateApply, ApplyRequest{Spec: renamed}) })
		h.at(2*time.Minute, func() { h.update("plain", UpdateApply, ApplyRequest{Spec: plain}) })
		h.check(3*time.Minute, "listening to the new set", func(st PoolStatus) bool {
			return st.ScaleSet.ScaleSetID == 6 && st.ScaleSet.Listening
		})
		h.run(spec, 3*time.Minute+time.Second)
		wantDeleted := []int64{5}
		if keep {
			wantDeleted = nil
		}
		if !slices.Equal(sim.deleted, wantDeleted) {
			t.Errorf("keepOnDelete %v: deleted sets %v, want %v", keep, sim.deleted, wantDeleted)
		}
		if o, _ := h.outcome("plain"); o.rejected == nil || !strings.Contains(o.rejected.Error(), "cannot become or stop being a scale set's") {
			t.Errorf("keepOnDelete %v: applying a spec without scaleSet: %+v, want it rejected", keep, o)
		}
	}
}

// A scale-set pool with a minimum starts no runner before its set exists: a runner takes its
// configuration from the set.
func TestScaleSetPoolStartsNoRunnerBeforeItsSet(t *testing.T) {
	sim := &scaleSetSim{nextID: 5}
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas = 2, ptr(3)
	spec.ScaleSet = &ScaleSetSpec{}
	failing := true
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(func(ctx context.Context, in EnsureScaleSetInput) (EnsureScaleSetOutput, error) {
			if failing {
				return EnsureScaleSetOutput{}, temporal.NewNonRetryableApplicationError("no such runner group", ErrInvalidSpec, nil)
			}
			return sim.ensure(ctx, in)
		}, activity.RegisterOptions{Name: ActivityEnsureScaleSet})
		h.env.RegisterWorkflowWithOptions(sim.listener, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
	}
	h.check(30*time.Second, "no runner, the failure shown", func(st PoolStatus) bool {
		return len(st.Runners) == 0 && strings.Contains(st.ScaleSet.Error, "no such runner group") && strings.Contains(st.Why, "starts held")
	})
	h.at(40*time.Second, func() { failing = false })
	h.check(2*time.Minute, "the minimum once the set exists", func(st PoolStatus) bool {
		return st.ScaleSet.ScaleSetID == 5 && len(st.Runners) == 2
	})
	h.run(spec, 2*time.Minute+time.Second)
}

// Runners that take their jobs, run them and end before the message saying the jobs started
// arrives (the listener hands messages over every few seconds; a short job is over sooner)
// leave those jobs waiting in the ledger: the pool starts no runner for them, and the later
// message, which names the runners, ends the hold.
func TestScaleSetPoolStartsNoRunnerForAJobItsFinishedRunnerRan(t *testing.T) {
	h, spec := newScaleSetPoolHarness(t)
	h.at(time.Minute, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 2, jobEvent(ScaleSetJobAssigned, 1, 2)...))
	})
	h.check(2*time.Minute, "a runner per job", func(st PoolStatus) bool { return len(st.Runners) == 2 })
	var ran []string
	h.at(2*time.Minute+time.Second, func() { ran = h.startJobsWithIDs(1, 2) })
	h.at(2*time.Minute+2*time.Second, func() { // as a runner reports: busy, then done when its pod succeeded
		for _, name := range ran {
			h.end(name, RunnerDone, EndReasonPodSucceeded)
		}
	})
	h.check(3*time.Minute, "both runners gone, their jobs still waiting in the ledger, no runner started for them", func(st PoolStatus) bool {
		return len(st.Runners) == 0 && len(st.ScaleSet.Ledger.Waiting) == 2 && len(st.ScaleSet.Finished) == 2 && st.Desired == 0
	})
	h.at(3*time.Minute+time.Second, func() {
		events := append(jobEvent(ScaleSetJobStarted, 1, 2), jobEvent(ScaleSetJobCompleted, 1, 2)...)
		for i := range events {
			events[i].RunnerName = ran[i%2]
		}
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 2, 0, events...))
	})
	h.check(4*time.Minute, "the message named them: nothing held, nothing waiting", func(st PoolStatus) bool {
		return len(st.ScaleSet.Finished) == 0 && st.ScaleSet.Ledger.Jobs() == 0 && st.Desired == 0
	})
	st := h.run(spec, 4*time.Minute+time.Second)
	if st.Totals.Started != 2 {
		t.Errorf("started %d runners for 2 jobs, want 2: none for a job a finished runner ran", st.Totals.Started)
	}
}

// The soak's case: a runner's completed message reaches the pool before the runner's own end
// (its cleanup takes a moment). The message named it, so its end is no job done a second time:
// the next job assigned to the set gets its runner at once.
func TestScaleSetPoolCountsARunnerItsCompletedMessageNamedOnce(t *testing.T) {
	h, spec := newScaleSetPoolHarness(t)
	h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 1, jobEvent(ScaleSetJobAssigned, 1)...)) })
	var ran []string
	h.at(2*time.Minute, func() { ran = h.startJobsWithIDs(1) })
	h.at(2*time.Minute+time.Second, func() {
		events := append(jobEvent(ScaleSetJobStarted, 1), jobEvent(ScaleSetJobCompleted, 1)...)
		for i := range events {
			events[i].RunnerName = ran[0]
		}
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 2, 0, events...))
	})
	h.check(2*time.Minute+3*time.Second, "the named runner leaving, its job over", func(st PoolStatus) bool {
		return len(st.Runners) == 1 && st.Runners[0].JobDone && st.ScaleSet.Ledger.Jobs() == 0
	})
	h.at(2*time.Minute+5*time.Second, func() { h.end(ran[0], RunnerDone, EndReasonPodSucceeded) })
	h.at(2*time.Minute+10*time.Second, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 3, 1, jobEvent(ScaleSetJobAssigned, 2)...))
	})
	h.check(2*time.Minute+15*time.Second, "a runner for the next job at once", func(st PoolStatus) bool {
		return len(st.ScaleSet.Finished) == 0 && st.Desired == 1 && len(st.Runners) == 1
	})
	st := h.run(spec, 2*time.Minute+20*time.Second)
	if st.Totals.Started != 2 {
		t.Errorf("started %d runners for 2 jobs, want 2", st.Totals.Started)
	}
}

// A runner ends after a job no message ever names (its messages were lost): the job it is
// taken to have run waits in the ledger for ScaleSetFinishedHold at most, and the pool wakes
// then, by itself, and starts a runner for it.
func TestScaleSetPoolWakesWhenAFinishedRunnersHoldLapses(t *testing.T) {
	h, spec := newScaleSetPoolHarness(t)
	h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 1, jobEvent(ScaleSetJobAssigned, 1)...)) })
	h.at(2*time.Minute, func() {
		for _, name := range h.startJobsWithIDs(1) {
			h.end(name, RunnerDone, EndReasonPodSucceeded)
		}
	})
	h.check(2*time.Minute+10*time.Second, "no runner while the hold lasts", func(st PoolStatus) bool {
		return len(st.Runners) == 0 && len(st.ScaleSet.Finished) == 1 && st.Desired == 0
	})
	h.check(2*time.Minute+ScaleSetFinishedHold+10*time.Second, "the hold over: a runner for the job still waiting", func(st PoolStatus) bool {
		return st.Desired == 1 && st.Totals.Started == 2
	})
	h.run(spec, 2*time.Minute+ScaleSetFinishedHold+20*time.Second)
}

// A burst on a service that offers its jobs (GHES): the jobs the listener acquired after a
// message count with it, so runners start for them at once, and the runners that wait for
// jobs 3 and 4 stay when the next message assigns and starts 1 and 2, whose runners already
// left, with statistics that count 3 and 4 alone (TestScaleSetDemandFollowsAcquisitions).
// A history from before the change counts the message alone.
func TestScaleSetPoolCountsTheJobsItsListenerAcquired(t *testing.T) {
	offers := func(id int64, acquired ...int64) ScaleSetMessageSignal {
		sig := scaleSetMessage(5, id, 0, jobEvent(ScaleSetJobAvailable, acquired...)...)
		sig.Acquired = acquired
		return sig
	}
	t.Run("before the change", func(t *testing.T) {
		h, spec := newScaleSetPoolHarness(t)
		setUp := h.onSegment
		h.onSegment = func() {
			setUp()
			h.env.OnGetVersion(changeScaleSetAcquiredAssigned, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		}
		h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, offers(1, 1, 2, 3, 4)) })
		h.check(time.Minute+5*time.Second, "the acquisitions not counted", func(st PoolStatus) bool {
			return st.ScaleSet.Ledger.Jobs() == 0 && st.Desired == 0 && len(st.Runners) == 0
		})
		h.run(spec, time.Minute+10*time.Second)
	})
	h, spec := newScaleSetPoolHarness(t)
	h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, offers(1, 1, 2, 3, 4)) })
	h.check(time.Minute+5*time.Second, "a runner per acquired job, before any assigned message", func(st PoolStatus) bool {
		return slices.Equal(st.ScaleSet.Ledger.Waiting, []int64{1, 2, 3, 4}) && st.Desired == 4 && len(st.Runners) == 4
	})
	var ran []string
	h.at(2*time.Minute, func() { ran = h.startJobsWithIDs(1, 2) })
	h.at(2*time.Minute+time.Second, func() {
		for _, name := range ran {
			h.end(name, RunnerDone, EndReasonPodSucceeded)
		}
	})
	h.at(2*time.Minute+10*time.Second, func() {
		events := jobEvent(ScaleSetJobAssigned, 1, 2)
		for i, e := range jobEvent(ScaleSetJobStarted, 1, 2) {
			e.RunnerName = ran[i]
			events = append(events, e)
		}
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 2, 2, events...))
	})
	h.check(2*time.Minute+15*time.Second, "the runners for 3 and 4 kept", func(st PoolStatus) bool {
		return slices.Equal(st.ScaleSet.Ledger.Waiting, []int64{3, 4}) && st.Desired == 2 && len(st.Runners) == 2
	})
	st := h.run(spec, 2*time.Minute+20*time.Second)
	if st.Totals.Started != 4 {
		t.Errorf("started %d runners for 4 jobs, want 4", st.Totals.Started)
	}
}

// newScaleSetPoolHarness is a harness whose pool is a scale set's (set 5, 0 to 5 runners): the
// set is created at once and its listener plays no messages of its own.
func newScaleSetPoolHarness(t *testing.T) (*poolHarness, PoolSpec) {
	sim := &scaleSetSim{nextID: 5}
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
	spec.ScaleSet = &ScaleSetSpec{}
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(sim.ensure, activity.RegisterOptions{Name: ActivityEnsureScaleSet})
		h.env.RegisterWorkflowWithOptions(sim.listener, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
	}
	return h, spec
}

// A job no runner acquired in time is cancelled (a completed message, result canceled) and
// assigned again in a later message, up to three times: each time it is open again in the
// ledger, and it runs on one runner, started once.
func TestScaleSetPoolRunsAReassignedJobOnOneRunner(t *testing.T) {
	h, spec := newScaleSetPoolHarness(t)
	canceled := func(id int64) ScaleSetJobEvent {
		return ScaleSetJobEvent{Event: ScaleSetJobCompleted, RunnerRequestID: id, Result: "canceled"}
	}
	h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 1, jobEvent(ScaleSetJobAssigned, 1)...)) })
	for i := range int64(3) {
		at := time.Minute + time.Duration(i+1)*20*time.Second
		h.at(at, func() { h.signal(SignalScaleSetMessage, scaleSetMessage(5, 2+2*i, 0, canceled(1))) })
		h.at(at+2*time.Second, func() {
			h.signal(SignalScaleSetMessage, scaleSetMessage(5, 3+2*i, 1, jobEvent(ScaleSetJobAssigned, 1)...))
		})
	}
	h.check(2*time.Minute+30*time.Second, "the job waiting again, one runner for it", func(st PoolStatus) bool {
		return slices.Equal(st.ScaleSet.Ledger.Waiting, []int64{1}) && st.Desired == 1 && len(st.Runners) == 1
	})
	var ran []string
	h.at(2*time.Minute+40*time.Second, func() { ran = h.startJobsWithIDs(1) })
	h.at(2*time.Minute+45*time.Second, func() {
		events := append(jobEvent(ScaleSetJobStarted, 1), jobEvent(ScaleSetJobCompleted, 1)...)
		for i := range events {
			events[i].RunnerName = ran[0]
		}
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 8, 0, events...))
	})
	h.check(3*time.Minute, "done", func(st PoolStatus) bool { return st.ScaleSet.Ledger.Jobs() == 0 })
	st := h.run(spec, 3*time.Minute+time.Second)
	if st.Totals.Started != 1 {
		t.Errorf("started %d runners for one job assigned four times, want 1", st.Totals.Started)
	}
}

// Jobs the ledger holds that the statistics no longer count (their messages lost to a
// truncated backlog) keep their runners only for ScaleSetLedgerExcessHold: the pool wakes by
// itself when it lapses and lets them go. The statistics a new session opens with count at
// once.
func TestScaleSetPoolTrustsTheStatisticsPastAHold(t *testing.T) {
	h, spec := newScaleSetPoolHarness(t)
	h.at(time.Minute, func() {
		h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 3, jobEvent(ScaleSetJobAssigned, 1, 2, 3)...))
	})
	// The service says one job is assigned; no message says what became of the other two.
	h.at(time.Minute+10*time.Second, func() { h.signal(SignalScaleSetMessage, scaleSetMessage(5, 2, 1)) })
	h.check(time.Minute+20*time.Second, "within the hold, the ledger's three jobs kept", func(st PoolStatus) bool {
		return st.ScaleSet.Ledger.Jobs() == 3 && st.Desired == 3 && !st.ScaleSet.ExcessSince.IsZero()
	})
	h.check(time.Minute+10*time.Second+ScaleSetLedgerExcessHold+5*time.Second, "the hold over: the statistics' one job", func(st PoolStatus) bool {
		return slices.Equal(st.ScaleSet.Ledger.Waiting, []int64{3}) && st.Desired == 1 && st.ScaleSet.ExcessSince.IsZero()
	})
	at := time.Minute + 10*time.Second + ScaleSetLedgerExcessHold + 10*time.Second
	h.at(at, func() {
		h.signal(SignalScaleSetSessionOpened, ScaleSetSessionOpened{ScaleSetID: 5, SessionID: "s2", Statistics: ScaleSetStatistics{AssignedJobs: 4}})
	})
	h.check(at+5*time.Second, "a new session's statistics count", func(st PoolStatus) bool {
		return st.Desired == 4 && st.ScaleSet.SessionID == "s2"
	})
	h.run(spec, at+10*time.Second)
}

// A pool renamed to another set while a runner of the old one runs a job: the old set is
// deleted only once that runner has ended, so its job completes where it runs.
func TestScaleSetPoolDeletesASetItLeftAfterItsRunners(t *testing.T) {
	sim := &scaleSetSim{nextID: 5}
	h, spec := newScaleSetPoolHarness(t)
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(sim.ensure, activity.RegisterOptions{Name: ActivityEnsureScaleSet})
		h.env.RegisterActivityWithOptions(sim.delete, activity.RegisterOptions{Name: ActivityDeleteScaleSet})
		h.env.RegisterWorkflowWithOptions(sim.listener, workflow.RegisterOptions{Name: ScaleSetListenerWorkflowType})
	}
	h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, scaleSetMessage(5, 1, 1, jobEvent(ScaleSetJobAssigned, 1)...)) })
	var busy []string
	h.at(2*time.Minute, func() { busy = h.startJobsWithIDs(1) })
	renamed := spec
	renamed.ScaleSet = &ScaleSetSpec{Name: "linux-big"}
	h.at(2*time.Minute+10*time.Second, func() { h.update("rename", UpdateApply, ApplyRequest{Spec: renamed}) })
	h.check(3*time.Minute, "on the new set; the old one kept while its runner runs", func(st PoolStatus) bool {
		return st.ScaleSet.ScaleSetID == 6 && len(st.ScaleSet.Left) == 1 && len(sim.deleted) == 0
	})
	h.at(4*time.Minute, func() { h.finishJobs(busy) })
	h.check(5*time.Minute, "the old set deleted after its runner ended", func(st PoolStatus) bool {
		return len(st.ScaleSet.Left) == 0 && slices.Equal(sim.deleted, []int64{5})
	})
	h.run(spec, 5*time.Minute+time.Second)
}

// A new session whose messages are numbered afresh, below the pool's cursor, is followed: its
// jobs count. A new session's message at the cursor is the last one handed over, come again,
// and counts once.
func TestScaleSetPoolFollowsASessionNumberedAfresh(t *testing.T) {
	h, spec := newScaleSetPoolHarness(t)
	inSession := func(session string, id int64, assigned int, events ...ScaleSetJobEvent) ScaleSetMessageSignal {
		m := scaleSetMessage(5, id, assigned, events...)
		m.SessionID = session
		return m
	}
	h.at(time.Minute, func() { h.signal(SignalScaleSetMessage, inSession("s1", 7, 1, jobEvent(ScaleSetJobAssigned, 1)...)) })
	h.at(time.Minute+time.Second, func() { h.signal(SignalScaleSetMessage, inSession("s2", 7, 1, jobEvent(ScaleSetJobAssigned, 1)...)) })
	h.check(time.Minute+5*time.Second, "the message at the cursor counted once", func(st PoolStatus) bool {
		return slices.Equal(st.ScaleSet.Ledger.Waiting, []int64{1}) && st.Desired == 1
	})
	h.at(time.Minute+10*time.Second, func() { h.signal(SignalScaleSetMessage, inSession("s3", 1, 2, jobEvent(ScaleSetJobAssigned, 2)...)) })
	h.check(time.Minute+15*time.Second, "the new session's job counted", func(st PoolStatus) bool {
		return slices.Equal(st.ScaleSet.Ledger.Waiting, []int64{1, 2}) && st.ScaleSet.Ledger.LastMessageID == 1 && st.Desired == 2
	})
	h.at(time.Minute+20*time.Second, func() { h.signal(SignalScaleSetMessage, inSession("s3", 2, 3, jobEvent(ScaleSetJobAssigned, 3)...)) })
	h.check(time.Minute+25*time.Second, "and the next", func(st PoolStatus) bool { return st.ScaleSet.Ledger.Jobs() == 3 })
	h.run(spec, time.Minute+30*time.Second)
}

// signalTogether delivers the signals in one workflow task, in order, as a server hands a
// worker the signals that arrived while no worker took the pool's task (the worker that had
// it stopping in a deploy). The pool's handlers then take them by signal name, not in the
// order they arrived.
func (h *poolHarness) signalTogether(at time.Duration, messages func() []poolMessage) {
	h.at(at, func() {
		msgs := messages()
		for i := range msgs {
			h.inTransit = append(h.inTransit, &poolEvent{msg: &msgs[i]})
			if i < len(msgs)-1 {
				h.env.SignalWorkflowSkippingWorkflowTask(msgs[i].signal, msgs[i].arg)
				continue
			}
			h.env.SignalWorkflow(msgs[i].signal, msgs[i].arg)
		}
	})
}

// The listener moves to a new session while the pool's workflow task waits for a worker (a
// rolling deploy): the new session's opening statistics, which still count four jobs about to
// complete, and the next message of that session, which completes them, reach the pool in one
// task. The message is the newer word: the pool starts no runner for the completed jobs, as it
// starts none when the two come one task each. Before the change the opening statistics,
// taken after the message, raised the demand by the four completed jobs until the next
// message (TestSessionStatisticsStale), and a history from before it still does.
func TestScaleSetPoolTakesNoSessionStatisticsOlderThanItsMessage(t *testing.T) {
	for _, tc := range []struct {
		together, before bool
		desired          int
		started          int64
	}{{false, false, 4, 8}, {true, false, 4, 8}, {true, true, 8, 10}} {
		together := tc.together
		h, spec := newScaleSetPoolHarness(t)
		spec.MaxReplicas = ptr(10)
		if tc.before {
			setUp := h.onSegment
			h.onSegment = func() {
				setUp()
				h.env.OnGetVersion(changeScaleSetSessionStatisticsOrder, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
		}
		inSession := func(session string, id int64, assigned int, events ...ScaleSetJobEvent) ScaleSetMessageSignal {
			m := scaleSetMessage(5, id, assigned, events...)
			m.SessionID = session
			return m
		}
		h.at(time.Minute, func() {
			h.signal(SignalScaleSetMessage, inSession("s1", 1, 4, jobEvent(ScaleSetJobAssigned, 1, 2, 3, 4)...))
		})
		var ran []string
		h.at(2*time.Minute, func() { ran = h.startJobsWithIDs(1, 2, 3, 4) })
		h.at(2*time.Minute+time.Second, func() {
			started := jobEvent(ScaleSetJobStarted, 1, 2, 3, 4)
			for i := range started {
				started[i].RunnerName = ran[i]
			}
			h.signal(SignalScaleSetMessage, inSession("s1", 2, 4, started...))
		})
		h.at(2*time.Minute+30*time.Second, func() {
			h.signal(SignalScaleSetMessage, inSession("s1", 3, 8, jobEvent(ScaleSetJobAssigned, 5, 6, 7, 8)...))
		})
		h.check(2*time.Minute+40*time.Second, "a runner per job", func(st PoolStatus) bool {
			return st.Desired == 8 && st.Totals.Started == 8
		})
		opened := poolMessage{signal: SignalScaleSetSessionOpened, arg: ScaleSetSessionOpened{
			ScaleSetID: 5, SessionID: "s2", Statistics: ScaleSetStatistics{AssignedJobs: 8},
		}}
		completed := func() poolMessage { // the runners' jobs completed: the new session's first message
			events := jobEvent(ScaleSetJobCompleted, 1, 2, 3, 4)
			for i := range events {
				events[i].RunnerName = ran[i]
			}
			return poolMessage{signal: SignalScaleSetMessage, arg: inSession("s2", 4, 4, events...)}
		}
		if together {
			h.signalTogether(3*time.Minute, func() []poolMessage { return []poolMessage{opened, completed()} })
		} else {
			h.at(3*time.Minute, func() { h.signal(opened.signal, opened.arg) })
			h.at(3*time.Minute+time.Second, func() { m := completed(); h.signal(m.signal, m.arg) })
		}
		h.check(3*time.Minute+10*time.Second, fmt.Sprintf("%+v: the demand after the new session's first message", tc), func(st PoolStatus) bool {
			return st.ScaleSet.SessionID == "s2" && st.Desired == tc.desired
		})
		st := h.run(spec, 3*time.Minute+20*time.Second)
		if st.Totals.Started != tc.started {
			t.Errorf("%+v: started %d runners for 8 jobs, want %d", tc, st.Totals.Started, tc.started)
		}
	}
}
