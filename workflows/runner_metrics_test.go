package workflows

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
)

// timerRecorder is a client.MetricsHandler that keeps every timer sample with its tags.
type timerRecorder struct {
	mu      *sync.Mutex
	tags    map[string]string
	samples *[]timerSample
}

type timerSample struct {
	name string
	tags map[string]string
	d    time.Duration
}

func newTimerRecorder() timerRecorder {
	return timerRecorder{mu: &sync.Mutex{}, tags: map[string]string{}, samples: &[]timerSample{}}
}

func (r timerRecorder) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range r.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return timerRecorder{mu: r.mu, tags: merged, samples: r.samples}
}

func (r timerRecorder) Counter(string) client.MetricsCounter {
	return client.MetricsNopHandler.Counter("")
}
func (r timerRecorder) Gauge(string) client.MetricsGauge { return client.MetricsNopHandler.Gauge("") }

func (r timerRecorder) Timer(name string) client.MetricsTimer { return recordingTimer{r, name} }

// of returns the samples of one metric.
func (r timerRecorder) of(name string) []timerSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []timerSample
	for _, s := range *r.samples {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

type recordingTimer struct {
	r    timerRecorder
	name string
}

func (t recordingTimer) Record(d time.Duration) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	*t.r.samples = append(*t.r.samples, timerSample{name: t.name, tags: t.r.tags, d: d})
}

// A persistent runner records the scale-up latencies once per job: the first job waited for
// its pod and for the runner to come online; a redelivered notice records nothing; the second
// job found the runner already there and records zero.
func TestRunnerRecordsScaleUpLatencyOncePerJob(t *testing.T) {
	rec := newTimerRecorder()
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetMetricsHandler(rec)
	h := newRunnerHarnessIn(t, suite).withPool()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h.env.SetStartTime(start)
	h.registered(0, "uid-1")
	h.podChecks(GetRunnerPodOutput{Exists: true, Phase: PodRunning})
	h.removes(1)
	h.deletes(1)

	queued := func(id int64, at time.Time) JobSignal {
		s := jobSig(id)
		s.QueuedAt = at
		return s
	}
	// Job 1 was queued 4 s before the pod was made; the listing sees the runner online at +2 s.
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(2*time.Second, SignalRunnerStatus, onlineSig)
	h.at(3*time.Second, SignalJobStarted, queued(1, start.Add(-4*time.Second)))
	h.at(4*time.Second, SignalJobStarted, queued(1, start.Add(-4*time.Second)))
	h.at(5*time.Second, SignalJobCompleted, jobSig(1))
	h.at(6*time.Second, SignalJobStarted, queued(2, start.Add(5500*time.Millisecond)))
	h.at(7*time.Second, SignalJobCompleted, jobSig(2))
	h.at(8*time.Second, SignalDrain, DrainRequest{Reason: "done"})
	h.mustRun(runnerTestInput(false))

	for name, want := range map[string][]time.Duration{
		MetricScaleUpPodCreated:   {4 * time.Second, 0},
		MetricScaleUpRunnerOnline: {6 * time.Second, 0},
	} {
		got := rec.of(name)
		if len(got) != len(want) {
			t.Fatalf("%s: %d samples %v, want %v", name, len(got), got, want)
		}
		for i, s := range got {
			if s.d != want[i] || s.tags["pool"] != runnerTestPool {
				t.Errorf("%s sample %d: %s pool %q, want %s in %s", name, i, s.d, s.tags["pool"], want[i], runnerTestPool)
			}
		}
	}
}

// A job that starts before any listing saw the runner online is its evidence of being online,
// from GitHub's started_at, never earlier than the pod was created (the activity's clock).
func TestRunnerOnlineLatencyFromTheJobItself(t *testing.T) {
	rec := newTimerRecorder()
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetMetricsHandler(rec)
	h := newRunnerHarnessIn(t, suite).withPool()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h.env.SetStartTime(start)
	h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.Anything).Return(
		RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName}, nil).Once()
	h.env.OnActivity(ActivityCreateRunnerPod, mock.Anything, mock.Anything).Return(
		CreateRunnerPodOutput{UID: "uid-1", CreatedAt: start.Add(-300 * time.Millisecond)}, nil).Once()
	h.env.OnActivity(ActivitySetSecretOwner, mock.Anything, mock.Anything).Return(Nothing{}, nil).Once()
	h.deletes(1)
	first := jobSig(1)
	first.QueuedAt, first.StartedAt = start.Add(-time.Second), start.Add(2*time.Second)
	h.at(time.Second, SignalPodStatus, podRunning("uid-1"))
	h.at(3*time.Second, SignalJobStarted, first)
	h.at(4*time.Second, SignalJobCompleted, jobSig(1))
	h.at(5*time.Second, SignalPodStatus, podSig("uid-1", PodSucceeded, ""))
	h.mustRun(runnerTestInput(true))
	if got := rec.of(MetricScaleUpPodCreated); len(got) != 1 || got[0].d != 700*time.Millisecond {
		t.Errorf("pod created samples %v, want one of 700ms", got)
	}
	if got := rec.of(MetricScaleUpRunnerOnline); len(got) != 1 || got[0].d != 3*time.Second {
		t.Errorf("online latency samples %v, want one of 3s (started_at)", got)
	}
}

func TestNoteOnlineTakesTheEarliestPlausibleEvidence(t *testing.T) {
	pod := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return pod.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name             string
		online           bool
		prev, now, start time.Time
		want             time.Time
	}{
		{"not online: nothing", false, time.Time{}, at(5), time.Time{}, time.Time{}},
		{"listing", true, time.Time{}, at(5), time.Time{}, at(5)},
		{"job start evidence", true, time.Time{}, at(5), at(3), at(3)},
		{"started_at (whole seconds) reads before the pod", true, time.Time{}, at(5), at(-0.4), at(0)},
		{"started_at after the notice (clock skew)", true, time.Time{}, at(5), at(6), at(5)},
		{"later evidence keeps the earlier", true, at(2), at(5), at(4), at(2)},
		{"earlier evidence wins", true, at(4), at(5), at(3), at(3)},
	} {
		o := RunnerObservations{Online: tc.online, PodCreatedAt: pod, OnlineAt: tc.prev}
		o.noteOnline(tc.now, tc.start)
		if !o.OnlineAt.Equal(tc.want) {
			t.Errorf("%s: OnlineAt %s, want %s", tc.name, o.OnlineAt, tc.want)
		}
	}
}
