package workflows

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// counterRecorder is a client.MetricsHandler that sums each counter by name and tags.
type counterRecorder struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
}

func newCounterRecorder() counterRecorder {
	return counterRecorder{mu: &sync.Mutex{}, tags: map[string]string{}, counts: map[string]int64{}}
}

func (r counterRecorder) WithTags(t map[string]string) client.MetricsHandler {
	all := maps.Clone(r.tags)
	maps.Copy(all, t)
	return counterRecorder{mu: r.mu, tags: all, counts: r.counts}
}
func (r counterRecorder) Counter(name string) client.MetricsCounter {
	return counterFunc(func(n int64) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.counts[seriesKey(name, r.tags)] += n
	})
}
func (r counterRecorder) Gauge(string) client.MetricsGauge { return client.MetricsNopHandler.Gauge("") }
func (r counterRecorder) Timer(string) client.MetricsTimer { return client.MetricsNopHandler.Timer("") }

// prewarmCounts are the recorded prewarm counters, without the SDK's own tags.
func (r counterRecorder) prewarmCounts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int64{}
	for k, v := range r.counts {
		if strings.HasPrefix(k, "runnerflow_pool_prewarm_") {
			out[k] = v
		}
	}
	return out
}

type counterFunc func(int64)

func (f counterFunc) Inc(n int64) { f(n) }

// TestPrewarmCounts follows the pipeline run's build through each way a warming ends: build's
// runner is warmed at 4:40 (due 5:10), then GitHub queues build (taken), or test fails (build
// will be skipped), or build is not queued by 7:10 (missed), or the run falls silent and is
// forgotten an hour after its last event, or is pushed out by newer runs. Runner time wasted
// is counted from 4:40 to the look that gives the runner up.
func TestPrewarmCounts(t *testing.T) {
	m, s := time.Minute, time.Second
	waste := func(reason string, held time.Duration) []PrewarmWaste {
		return []PrewarmWaste{{Reason: reason, Runners: 1, Held: held}}
	}
	newRuns := func(n int, at time.Duration) []WorkflowJobEvent {
		var evs []WorkflowJobEvent
		for i := range n {
			ev := prewarmEvent(JobQueued, int64(1000+i), "lint", at)
			ev.RunID = int64(100 + i)
			evs = append(evs, ev)
		}
		return evs
	}
	for _, tc := range []struct {
		name   string
		events []WorkflowJobEvent
		at     time.Duration
		want   PrewarmCounts
	}{
		{"still warm: made only", nil, 6 * m, PrewarmCounts{Predicted: 1}},
		{"queued: taken", []WorkflowJobEvent{
			completedEvent(1, "lint", 0, 2*m, "success"),
			completedEvent(2, "test", 10*s, 5*m, "success"),
			prewarmEvent(JobQueued, 3, "Build image", 5*m+1*s),
		}, 5*m + 2*s, PrewarmCounts{Predicted: 1, Taken: 1}},
		{"test failed: skipped", []WorkflowJobEvent{completedEvent(2, "test", 10*s, 4*m+50*s, "failure")}, 4*m + 51*s,
			PrewarmCounts{Predicted: 1, Wasted: waste(WarmSkipped, 11*s)}},
		{"not queued by 7:10: missed", nil, 7*m + 10*s, PrewarmCounts{Predicted: 1, Wasted: waste(WarmMissed, 2*m+30*s)}},
		// Heard last at 0:00 (lint's and test's queued events): forgotten at 1:00:00.
		{"the run silent an hour: forgotten", nil, time.Hour, PrewarmCounts{Predicted: 1, Wasted: waste(WarmForgotten, time.Hour-4*m-40*s)}},
		{"newer runs push it out: forgotten", newRuns(PrewarmRunsKept, 5*m), 5 * m,
			PrewarmCounts{Predicted: 1, Wasted: waste(WarmForgotten, 20*s)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due := planAt(prewarmRunning(t), 4*m+40*s)
			if due.State.Counts.Predicted != 1 {
				t.Fatalf("at 4:40: counts %+v, want build's one runner made", due.State.Counts)
			}
			st := due.State
			if len(tc.events) > 0 {
				st = ObservePrewarm(st, tc.events, afterStart(tc.at))
			}
			got := planAt(st, tc.at).State.Counts
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("counts %+v, want %+v", got, tc.want)
			}
			// A later look counts nothing twice.
			again := planAt(planAt(st, tc.at).State, tc.at+time.Minute).State.Counts
			if again.Taken != tc.want.Taken || fmt.Sprint(again.Wasted) != fmt.Sprint(tc.want.Wasted) {
				t.Errorf("a minute later: counts %+v, want still %+v", again, tc.want)
			}
		})
	}
}

// The plan counts on its own copy: the state it was given keeps its counts.
func TestPrewarmCountsLeaveTheGivenStateAlone(t *testing.T) {
	st := planAt(prewarmRunning(t), 4*time.Minute+40*time.Second).State
	st.Counts.Wasted = []PrewarmWaste{{Reason: WarmMissed, Runners: 1}}
	before := fmt.Sprint(st.Counts)
	ObservePrewarm(st, []WorkflowJobEvent{completedEvent(2, "test", 10*time.Second, 4*time.Minute+50*time.Second, "failure")}, afterStart(5*time.Minute))
	planAt(st, 10*time.Minute)
	if after := fmt.Sprint(st.Counts); after != before {
		t.Errorf("counts of the state given changed: %s, were %s", after, before)
	}
}

// Counts are emitted as counters by pool and reason, each reason's runner time in whole
// seconds; what is under a second is kept for the next emission, and nothing is emitted for
// what is zero.
func TestPrewarmCountsEmit(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    PrewarmCounts
		want map[string]int64
		left []PrewarmWaste
	}{
		{"nothing counted", PrewarmCounts{}, map[string]int64{}, nil},
		{"made and taken", PrewarmCounts{Predicted: 5, Taken: 4}, map[string]int64{
			"runnerflow_pool_prewarm_predicted_runners{pool=p}": 5, "runnerflow_pool_prewarm_taken_runners{pool=p}": 4,
		}, nil},
		{"wasted by reason, a fraction kept", PrewarmCounts{Predicted: 1, Wasted: []PrewarmWaste{
			{Reason: WarmSkipped, Runners: 4, Held: 90*time.Second + 300*time.Millisecond},
			{Reason: WarmMissed, Runners: 1, Held: 150 * time.Second},
			{Reason: WarmForgotten, Held: 700 * time.Millisecond},
		}}, map[string]int64{
			"runnerflow_pool_prewarm_predicted_runners{pool=p}":                    1,
			"runnerflow_pool_prewarm_wasted_runners{pool=p,reason=skipped}":        4,
			"runnerflow_pool_prewarm_wasted_runner_seconds{pool=p,reason=skipped}": 90,
			"runnerflow_pool_prewarm_wasted_runners{pool=p,reason=missed}":         1,
			"runnerflow_pool_prewarm_wasted_runner_seconds{pool=p,reason=missed}":  150,
		}, []PrewarmWaste{{Reason: WarmSkipped, Held: 300 * time.Millisecond}, {Reason: WarmForgotten, Held: 700 * time.Millisecond}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newCounterRecorder()
			left := tc.c.emit(rec.WithTags(map[string]string{"pool": "p"}))
			if got := rec.prewarmCounts(); !maps.Equal(got, tc.want) {
				t.Errorf("emitted %v, want %v", got, tc.want)
			}
			if left.Predicted != 0 || left.Taken != 0 || !slices.Equal(left.Wasted, tc.left) {
				t.Errorf("left %+v, want only %+v", left, tc.left)
			}
		})
	}
}

// Wasted entries keep PrewarmWasteReasons' order whatever order the reasons come in, so the
// state's form depends on nothing but what was counted.
func TestPrewarmWasteKeepsReasonOrder(t *testing.T) {
	var c PrewarmCounts
	at := afterStart(time.Minute)
	for _, reason := range []string{WarmForgotten, WarmMissed, WarmSkipped, WarmMissed} {
		c.waste(reason, PrewarmWarmed{Runners: 2, At: runStart}, at)
	}
	var order []string
	for _, w := range c.Wasted {
		order = append(order, w.Reason)
	}
	if !slices.Equal(order, PrewarmWasteReasons) || c.Wasted[1].Runners != 4 || c.Wasted[1].Held != 4*time.Minute {
		t.Errorf("wasted %+v, want one entry per reason in %v, missed's 4 runners held 4 min", c.Wasted, PrewarmWasteReasons)
	}
	c.waste(WarmSkipped, PrewarmWarmed{Runners: 3}, at) // made before PrewarmWarmed.At
	if c.Wasted[0].Runners != 5 || c.Wasted[0].Held != 2*time.Minute {
		t.Errorf("skipped %+v: want the runners of an entry without a start counted, not its time", c.Wasted[0])
	}
}
