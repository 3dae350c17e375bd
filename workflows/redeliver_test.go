package workflows

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestParseHookRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want HookRef
		bad  bool
	}{
		{in: "", want: HookRef{}},
		{in: "none", want: HookRef{}},
		{in: "app", want: HookRef{App: true}},
		{in: "org:acme/12", want: HookRef{Organization: "acme", ID: 12}},
		{in: "repo:acme/app/7", want: HookRef{Repository: "acme/app", ID: 7}},
		{in: "org:acme", bad: true},       // no hook id
		{in: "org:acme/x", bad: true},     // not a number
		{in: "org:acme/0", bad: true},     // no such id
		{in: "repo:acme/7", bad: true},    // a repository is owner/repo
		{in: "repo:a/b/c/7", bad: true},   // nor more
		{in: "team:acme/7", bad: true},    // hooks belong to Apps, organizations and repositories
		{in: "enterprise:e/7", bad: true}, // enterprise hooks have no deliveries API runnerflow uses
		{in: "org:/7", bad: true},         // no organization
	} {
		got, err := ParseHookRef(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseHookRef(%q) = %+v, %v; want %+v, error %t", tc.in, got, err, tc.want, tc.bad)
		}
		if err == nil && !got.IsZero() {
			if back, err := ParseHookRef(got.String()); err != nil || back != got {
				t.Errorf("%q does not read back: %+v, %v", got.String(), back, err)
			}
		}
	}
}

func TestSummarizeDeliveries(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	job := func(id int64, guid string, s, status int, redelivery bool) HookAttempt {
		return HookAttempt{ID: id, GUID: guid, At: at(s), StatusCode: status, Redelivery: redelivery, Event: EventWorkflowJob, Action: "queued"}
	}
	attempts := []HookAttempt{ // newest first, as GitHub lists them
		job(9, "fixed", 90, 202, true),                                  // a redelivery that succeeded: nothing to do
		job(8, "twice", 80, 503, true),                                  // redelivered already, failed again
		{ID: 7, GUID: "push", At: at(70), StatusCode: 0, Event: "push"}, // not an event runnerflow acts on
		job(6, "down", 60, 0, false),                                    // no answer at all
		job(5, "fixed", 50, 502, false),
		job(4, "twice", 40, 503, false),
		job(3, "ok", 30, 200, false),
		job(2, "redirect", 20, 302, false), // GitHub counts 3xx as delivered
		job(1, "old", -10, 500, false),     // before the window
	}
	s := SummarizeDeliveries(attempts, t0)
	if s.Listed != 8 {
		t.Errorf("listed %d, want the 8 attempts in the window", s.Listed)
	}
	if s.Newest == nil || s.Newest.ID != 9 || !s.Newest.Succeeded() {
		t.Errorf("newest %+v, want attempt 9, a success", s.Newest)
	}
	want := []FailedEvent{
		{GUID: "twice", Event: EventWorkflowJob, Action: "queued", DeliveryID: 8, FailedAt: at(40), StatusCode: 503, Redelivered: true},
		{GUID: "down", Event: EventWorkflowJob, Action: "queued", DeliveryID: 6, FailedAt: at(60), StatusCode: 0},
	}
	if !slices.Equal(s.Failed, want) {
		t.Errorf("failed %+v\nwant %+v", s.Failed, want)
	}
	if s.ProbeCandidate == nil || s.ProbeCandidate.ID != 9 {
		t.Errorf("probe candidate %+v, want attempt 9, the newest queued event that succeeded", s.ProbeCandidate)
	}
	if got := SummarizeDeliveries(nil, t0); got.Listed != 0 || got.Newest != nil || got.Failed != nil {
		t.Errorf("an empty listing summarised as %+v", got)
	}
}

func TestPlanRedeliveries(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	failed := func(guid string, redelivered bool) FailedEvent {
		return FailedEvent{GUID: guid, Event: EventWorkflowJob, DeliveryID: 1, FailedAt: t0, Redelivered: redelivered}
	}
	up := &HookAttempt{ID: 9, StatusCode: 202}
	down := &HookAttempt{ID: 9, StatusCode: 503}
	guids := func(p RedeliveryPlan) []string {
		var out []string
		for _, f := range p.Redeliver {
			out = append(out, f.GUID)
		}
		return out
	}
	for _, tc := range []struct {
		name              string
		in                RedeliveryPlanInput
		want              []string
		already, deferred int
		probe             bool
		by                ProbeKind
	}{
		{name: "nothing failed", in: RedeliveryPlanInput{Summary: DeliverySummary{Newest: up}}},
		{
			name: "the receiver answers again: every failed event, once",
			in:   RedeliveryPlanInput{Summary: DeliverySummary{Newest: up, Failed: []FailedEvent{failed("a", false), failed("b", false)}}},
			want: []string{"a", "b"},
		},
		{
			name: "GitHub lists a redelivery, or an earlier run remembers one: never again",
			in: RedeliveryPlanInput{
				Summary:    DeliverySummary{Newest: up, Failed: []FailedEvent{failed("a", true), failed("b", false), failed("c", false)}},
				Remembered: []RememberedDelivery{{GUID: "b", At: t0}},
			},
			want: []string{"c"}, already: 2,
		},
		{
			name:     "the receiver's last answer a failure: a ping probes it, no event is spent",
			in:       RedeliveryPlanInput{CanPing: true, Summary: DeliverySummary{Newest: down, Failed: []FailedEvent{failed("a", false), failed("b", false)}}},
			deferred: 2, probe: true, by: ProbePing,
		},
		{
			name:     "no ping (the App's hook): a delivery that succeeded probes it",
			in:       RedeliveryPlanInput{Summary: DeliverySummary{Newest: down, ProbeCandidate: up, Failed: []FailedEvent{failed("a", false)}}},
			deferred: 1, probe: true, by: ProbeSucceededDelivery,
		},
		{
			name:     "no ping, nothing succeeded in the window: the events wait",
			in:       RedeliveryPlanInput{Summary: DeliverySummary{Newest: down, Failed: []FailedEvent{failed("a", false)}}},
			deferred: 1, probe: true, by: ProbeNone,
		},
		{
			name: "before reconcile-harmless-probe: one event probes it and is spent",
			in:   RedeliveryPlanInput{SpendEvent: true, CanPing: true, Summary: DeliverySummary{Newest: down, Failed: []FailedEvent{failed("a", false), failed("b", false)}}},
			want: []string{"a"}, deferred: 1, probe: true, by: ProbeFailedEvent,
		},
		{
			name:    "only redelivered events left: no probe",
			in:      RedeliveryPlanInput{Summary: DeliverySummary{Newest: down, Failed: []FailedEvent{failed("a", true)}}},
			already: 1,
		},
		{
			name: "the limit leaves the rest for the next run",
			in:   RedeliveryPlanInput{Limit: 2, Summary: DeliverySummary{Newest: up, Failed: []FailedEvent{failed("a", false), failed("b", false), failed("c", false)}}},
			want: []string{"a", "b"}, deferred: 1,
		},
	} {
		p := PlanRedeliveries(tc.in)
		if !slices.Equal(guids(p), tc.want) || p.AlreadyRedelivered != tc.already || p.Deferred != tc.deferred || p.Probe != tc.probe || p.ProbeBy != tc.by {
			t.Errorf("%s: plan %v, already %d, deferred %d, probe %t by %q; want %v, %d, %d, %t by %q",
				tc.name, guids(p), p.AlreadyRedelivered, p.Deferred, p.Probe, p.ProbeBy, tc.want, tc.already, tc.deferred, tc.probe, tc.by)
		}
	}
}

// A hook without a ping is probed with an attempt that succeeded and whose repeat changes
// nothing: an event the intake ignores first, then a queued event; never a failed attempt, nor
// an in_progress or completed event (they would reach runner workflows again).
func TestSummarizeDeliveriesPicksAHarmlessProbe(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	job := func(id int64, action string, s, status int) HookAttempt {
		return HookAttempt{ID: id, GUID: fmt.Sprint(id), At: at(s), StatusCode: status, Event: EventWorkflowJob, Action: action}
	}
	for _, tc := range []struct {
		name     string
		attempts []HookAttempt
		want     int64
	}{
		{"nothing succeeded", []HookAttempt{job(2, JobQueued, 20, 0), job(1, JobQueued, 10, 503)}, 0},
		{"only job starts and ends succeeded", []HookAttempt{job(2, JobCompleted, 20, 202), job(1, JobInProgress, 10, 202)}, 0},
		{"the newest queued event that succeeded", []HookAttempt{job(3, JobQueued, 30, 0), job(2, JobQueued, 20, 202), job(1, JobQueued, 10, 202)}, 2},
		{"an event the intake ignores before a queued one", []HookAttempt{job(3, JobQueued, 30, 202), {ID: 2, GUID: "p", At: at(20), StatusCode: 200, Event: "ping"}}, 2},
		{"not from before the window", []HookAttempt{job(2, JobQueued, 20, 0), job(1, JobQueued, -10, 202)}, 0},
	} {
		got := SummarizeDeliveries(tc.attempts, t0).ProbeCandidate
		if (got == nil && tc.want != 0) || (got != nil && got.ID != tc.want) {
			t.Errorf("%s: probe candidate %+v, want attempt %d", tc.name, got, tc.want)
		}
	}
}

func TestCarryRememberedKeepsTheWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	prev := []RememberedDelivery{{GUID: "old", At: t0.Add(-time.Second)}, {GUID: "b", At: t0}, {GUID: "a", At: t0.Add(time.Minute)}}
	got := CarryRemembered(prev, []RememberedDelivery{{GUID: "c", At: t0.Add(time.Hour)}, {GUID: "a", At: t0.Add(time.Hour)}}, t0)
	want := []RememberedDelivery{{GUID: "a", At: t0.Add(time.Minute)}, {GUID: "b", At: t0}, {GUID: "c", At: t0.Add(time.Hour)}}
	if !slices.Equal(got, want) {
		t.Errorf("remembered %+v\nwant %+v", got, want)
	}
}
