package main

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/workflows"
)

// PodPathTrace is where a pod-first runner's time went between its pod's creation and its
// pod running (issue 37's warm start and issue 38's pod → online gap), read from the runner
// histories of a burst. A pod created before its Secret (the credential window) starts only
// after four hand-overs, each a part of the trace:
//   - Scheduled: the pod created → the pod watcher's "scheduled" signal in the history (the
//     scheduler's binding, the watcher's informer and its signal queue);
//   - Woken: that signal → the runner's workflow task that acts on it started (the runner
//     task queue's wait);
//   - CredentialQueued: the credential activity (registration, a scale set's JIT runner or the
//     warm copy) scheduled → started (its task queue's wait);
//   - CredentialRun: its run (GitHub's or the Actions service's answer and the Secret's write);
//   - Running: the credential written → the watcher's "running" signal (the kubelet's next
//     try, the container's start, the watcher again).
//
// Total is the pod created → running heard. Runners whose pod was created with its Secret
// (no credential window) are not in it.
type PodPathTrace struct {
	Scheduled        Percentiles `json:"scheduled"`
	Woken            Percentiles `json:"woken"`
	CredentialQueued Percentiles `json:"credentialQueued"`
	CredentialRun    Percentiles `json:"credentialRun"`
	Running          Percentiles `json:"running"`
	Total            Percentiles `json:"total"`
}

// credentialActivities are the activities that write a pod-first runner's credential.
var credentialActivities = map[string]bool{
	workflows.ActivityRegisterRunner:       true,
	workflows.ActivityCreateScaleSetRunner: true,
	workflows.ActivityCopyWarmSecret:       true,
}

// podPathTracer builds a PodPathTrace from runner histories shown to it one after another,
// each from its first event (historyCost's visit). Only the first attempt of a history counts.
type podPathTracer struct {
	// Per history: activity types by scheduled event id, and the path's moments.
	activity                              map[int64]string
	podCreated, scheduledHeard, woken     time.Time
	credScheduled, credStarted, credDone  time.Time
	credScheduledID                       int64
	done                                  bool
	scheduled, wake, queued, run, running []time.Duration
	total                                 []time.Duration
}

func newPodPathTracer() *podPathTracer { return &podPathTracer{} }

// visit takes the next event of the history being shown; an event id of 1 starts a new one.
func (t *podPathTracer) visit(ev *historypb.HistoryEvent) {
	if ev.GetEventId() == 1 {
		*t = podPathTracer{activity: map[int64]string{},
			scheduled: t.scheduled, wake: t.wake, queued: t.queued, run: t.run, running: t.running, total: t.total}
	}
	if t.done || t.activity == nil {
		return
	}
	at := ev.GetEventTime().AsTime()
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		t.activity[ev.GetEventId()] = name
		if credentialActivities[name] && !t.podCreated.IsZero() && t.credScheduled.IsZero() {
			t.credScheduled, t.credScheduledID = at, ev.GetEventId()
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		if id := ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId(); id == t.credScheduledID && t.credStarted.IsZero() {
			t.credStarted = at
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := ev.GetActivityTaskCompletedEventAttributes()
		switch {
		case t.activity[a.GetScheduledEventId()] == workflows.ActivityCreateRunnerPod && t.podCreated.IsZero():
			t.podCreated = at
		case a.GetScheduledEventId() == t.credScheduledID && t.credDone.IsZero():
			t.credDone = at
		}
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
		if !t.scheduledHeard.IsZero() && t.woken.IsZero() {
			t.woken = at
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a.GetSignalName() != workflows.SignalPodStart || t.podCreated.IsZero() {
			return
		}
		var sig workflows.PodStatusSignal
		if converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &sig) != nil {
			return
		}
		if t.scheduledHeard.IsZero() {
			t.scheduledHeard = at // a pod heard running first was scheduled too
		}
		if sig.Phase == workflows.PodRunning && !t.credDone.IsZero() {
			t.note(at)
		}
	}
}

// note ends the history's path at its pod heard running, if every moment before it was seen.
func (t *podPathTracer) note(running time.Time) {
	t.done = true
	if t.woken.IsZero() || t.credStarted.IsZero() {
		return
	}
	t.scheduled = append(t.scheduled, t.scheduledHeard.Sub(t.podCreated))
	t.wake = append(t.wake, t.woken.Sub(t.scheduledHeard))
	t.queued = append(t.queued, t.credStarted.Sub(t.credScheduled))
	t.run = append(t.run, t.credDone.Sub(t.credStarted))
	t.running = append(t.running, running.Sub(t.credDone))
	t.total = append(t.total, running.Sub(t.podCreated))
}

func (t *podPathTracer) result() PodPathTrace {
	return PodPathTrace{
		Scheduled: summarize(t.scheduled), Woken: summarize(t.wake), CredentialQueued: summarize(t.queued),
		CredentialRun: summarize(t.run), Running: summarize(t.running), Total: summarize(t.total),
	}
}
