package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// ev builds a history event at t0 + sec seconds.
func ev(typ enumspb.EventType, sec int, attrs ...func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
	e := &historypb.HistoryEvent{EventType: typ, EventTime: timestamppb.New(t0.Add(time.Duration(sec) * time.Second))}
	for _, a := range attrs {
		a(e)
	}
	return e
}

func attempt(n int32) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: n}}
	}
}

func marker(name string, task int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{
			MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: name, WorkflowTaskCompletedEventId: task}}
	}
}

func upsert(fields ...string) func(*historypb.HistoryEvent) {
	m := map[string]*commonpb.Payload{}
	for _, f := range fields {
		m[f] = &commonpb.Payload{}
	}
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: m}}}
	}
}

func TestCountHistory(t *testing.T) {
	const (
		started   = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
		signaled  = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
		taskSched = enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
	)
	tests := []struct {
		name   string
		events []*historypb.HistoryEvent
		since  time.Time
		want   HistoryCost
	}{
		{"signal-with-start is one action", []*historypb.HistoryEvent{ev(started, 0), ev(signaled, 0), ev(taskSched, 0), ev(signaled, 1)},
			t0, HistoryCost{Runs: 1, Events: 4, Actions: Actions{WorkflowStarts: 1, Signals: 1}}},
		{"a plain start and a signal are two", []*historypb.HistoryEvent{ev(started, 0), ev(taskSched, 0), ev(signaled, 1)},
			t0, HistoryCost{Runs: 1, Events: 3, Actions: Actions{WorkflowStarts: 1, Signals: 1}}},
		{"activity retries count", []*historypb.HistoryEvent{
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 0), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, 5, attempt(3)),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 6), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, 6, attempt(1)),
		}, t0, HistoryCost{Runs: 1, Events: 4, Actions: Actions{Activities: 4}}},
		{"timers, updates, children", []*historypb.HistoryEvent{
			ev(enumspb.EVENT_TYPE_TIMER_STARTED, 0), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, 0),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, 0), ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, 0),
			ev(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, 0),
		}, t0, HistoryCost{Runs: 1, Events: 5, Actions: Actions{Timers: 1, Updates: 1, ChildStarts: 1}}},
		{"upserts of the version attribute alone are free", []*historypb.HistoryEvent{
			ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, 0, upsert("RunnerState", "RunnerPool")),
			ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, 0, upsert("TemporalChangeVersion")),
		}, t0, HistoryCost{Runs: 1, Events: 2, Actions: Actions{SearchAttributeUpserts: 1}}},
		{"markers count once per workflow task, version markers not at all", []*historypb.HistoryEvent{
			ev(enumspb.EVENT_TYPE_MARKER_RECORDED, 0, marker("SideEffect", 4)), ev(enumspb.EVENT_TYPE_MARKER_RECORDED, 0, marker("LocalActivity", 4)),
			ev(enumspb.EVENT_TYPE_MARKER_RECORDED, 0, marker("SideEffect", 9)), ev(enumspb.EVENT_TYPE_MARKER_RECORDED, 0, marker("Version", 12)),
		}, t0, HistoryCost{Runs: 1, Events: 4, Actions: Actions{Markers: 2}}},
		{"events before since are not counted", []*historypb.HistoryEvent{
			ev(started, 0), ev(taskSched, 0), ev(enumspb.EVENT_TYPE_TIMER_STARTED, 1), ev(signaled, 10), ev(enumspb.EVENT_TYPE_TIMER_STARTED, 11),
		}, t0.Add(10 * time.Second), HistoryCost{Runs: 1, Events: 2, Actions: Actions{Signals: 1, Timers: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := countHistory(tc.events, tc.since); got != tc.want {
				t.Errorf("countHistory = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	var sample []time.Duration
	for i := 100; i >= 1; i-- {
		sample = append(sample, time.Duration(i)*time.Millisecond)
	}
	want := Percentiles{N: 100, P50ms: 50, P95ms: 95, P99ms: 99, MaxMs: 100}
	if got := summarize(sample); got != want {
		t.Errorf("summarize(1..100 ms) = %+v, want %+v", got, want)
	}
	if got := summarize([]time.Duration{7 * time.Millisecond}); got != (Percentiles{N: 1, P50ms: 7, P95ms: 7, P99ms: 7, MaxMs: 7}) {
		t.Errorf("summarize of one = %+v", got)
	}
	if got := summarize(nil); got != (Percentiles{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
	if sample[0] != 100*time.Millisecond {
		t.Error("summarize sorted the caller's slice")
	}
}

func TestParseFlagsRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--jobs", "abc"}, {"--jobs", "0"}, {"--jobs", "2001"}, {"--idle", "5000,1000"}, {"--idle", ""},
		{"--skip", "everything"}, {"--rate", "0"}, {"--load-duration", "0s"}, {"--rate", "1", "--load-duration", "10ms"},
		{"--github-budget", "-1"}, {"extra"}, {"--pools", "-1"}, {"--pools", "50", "--workers", "0"},
		{"--pools", "50", "--pool-runners", "1001"}, {"--peer", "argo"}, {"--peer", "arc,arc"}, {"--peer", "arc,"},
		{"--peer", "arc-scaleset", "--skip", "burst"}, {"--warm", "-1"}, {"--jobs", "100,500", "--warm", "501"},
		{"--pipelines", "-1"},
	} {
		if _, _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted bad input", args)
		}
	}
	opts, out, err := parseFlags([]string{"--jobs", "100, 500", "--skip", "memory", "--out", "r.json"}, io.Discard)
	if err != nil || out != "r.json" || len(opts.Jobs) != 2 || opts.Jobs[1] != 500 || !opts.runs("burst") || opts.runs("memory") {
		t.Errorf("parseFlags = %+v, %q, %v", opts, out, err)
	}
	opts, _, err = parseFlags([]string{"--jobs", "100,500", "--warm", "500"}, io.Discard)
	if err != nil || opts.Warm != 500 {
		t.Errorf("parseFlags(--jobs 100,500 --warm 500) = %+v, %v", opts, err)
	}
	opts, _, err = parseFlags([]string{"--pools", "50", "--workers", "3"}, io.Discard)
	if err != nil || opts.Pools != 50 || opts.Workers != 3 || opts.PoolRunners != 20 {
		t.Errorf("parseFlags(--pools 50 --workers 3) = %+v, %v", opts, err)
	}
	opts, _, err = parseFlags([]string{"--peer", "arc,arc-scaleset,arc-scaleset-tuned"}, io.Discard)
	if err != nil || !slices.Equal(opts.peers(), []string{peerARC, peerARCScaleSet, peerARCScaleSetTuned}) {
		t.Errorf("parseFlags(--peer arc,arc-scaleset,arc-scaleset-tuned) = %q, %v", opts.peers(), err)
	}
}

func TestOnlineTimesRecordsTheSimulatorsLine(t *testing.T) {
	var forwarded bytes.Buffer
	h := newOnlineTimes(slog.NewTextHandler(&forwarded, &slog.HandlerOptions{Level: slog.LevelWarn}))
	log := slog.New(h).With("part", "simulator")
	log.With("runner", "pool-a-1", "pod", "ns/pool-a-1").Info(simulatorOnlineMessage, "ephemeral", true)
	first, ok := h.at("pool-a-1")
	log.Info(simulatorOnlineMessage, "runner", "pool-a-1") // a second line keeps the first time
	log.Info(simulatorOnlineMessage, "runner", "pool-a-2")
	log.Info("job acquired", "runner", "pool-a-3")
	log.Warn("runner could not come online", "runner", "pool-a-4")
	if again, _ := h.at("pool-a-1"); !ok || first.IsZero() || !again.Equal(first) {
		t.Errorf("pool-a-1 online at %v then %v (%v), want its first line's time", first, again, ok)
	}
	if _, ok := h.at("pool-a-2"); !ok {
		t.Error("a runner named in the line's own attributes was not recorded")
	}
	for _, r := range []string{"pool-a-3", "pool-a-4"} {
		if _, ok := h.at(r); ok {
			t.Errorf("%s recorded online from another line", r)
		}
	}
	if out := forwarded.String(); !strings.Contains(out, "could not come online") || !strings.Contains(out, "part=simulator") || strings.Contains(out, "job acquired") {
		t.Errorf("forwarded %q, want the warning with its attributes and nothing below warn", out)
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tworker\nVmPeak:\t  900000 kB\nVmRSS:\t   61196 kB\nThreads:\t12\n"
	if got, err := parseRSS(bufio.NewScanner(strings.NewReader(status))); err != nil || got != 61196 {
		t.Errorf("parseRSS = %d, %v; want 61196", got, err)
	}
	if _, err := parseRSS(bufio.NewScanner(strings.NewReader("Name:\tworker\n"))); err == nil {
		t.Error("parseRSS without a VmRSS line gave no error")
	}
}
