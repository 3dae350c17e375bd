package workflows

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Operator requests the pool cannot honour are rejected by its validators, with a message that
// says why, and change nothing.
func TestPoolRejectsBadOperatorRequests(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec() // min 1, max 5
	renamed := poolTestSpec()
	renamed.Name = "other"
	invalid := poolTestSpec()
	invalid.MinReplicas = 9
	requests := []struct {
		label, update string
		arg           any
		want          string
	}{
		{"min above max", UpdateScale, ScaleRequest{Min: ptr(6)}, "scale: min (6) must be <= max (5)"},
		{"max below min", UpdateScale, ScaleRequest{Max: ptr(0)}, "scale: min (1) must be <= max (0)"},
		{"negative", UpdateScale, ScaleRequest{Min: ptr(-1)}, "scale: min must be >= 0"},
		{"too large", UpdateScale, ScaleRequest{Max: ptr(MaxPoolReplicas + 1)}, "scale: max must be between 0 and"},
		{"empty", UpdateScale, ScaleRequest{}, `set "min", "max" or both`},
		{"renamed", UpdateApply, ApplyRequest{Spec: renamed}, "a pool cannot be renamed"},
		{"invalid spec", UpdateApply, ApplyRequest{Spec: invalid}, "spec.maxReplicas: Invalid value: 5: must be >= minReplicas (9)"},
	}
	for i, r := range requests {
		h.at(time.Minute+time.Duration(i)*time.Second, func() { h.update(r.label, r.update, r.arg) })
	}
	end := h.run(spec, 3*time.Minute)
	for _, r := range requests {
		o, ok := h.outcome(r.label)
		if !ok || o.rejected == nil {
			t.Errorf("%s: outcome %+v, want rejected", r.label, o)
			continue
		}
		if !strings.Contains(o.rejected.Error(), r.want) {
			t.Errorf("%s: rejected with %q, want it to contain %q", r.label, o.rejected, r.want)
		}
	}
	if end.Bounds != (Bounds{Min: 1, Max: 5}) || end.Spec.Name != "linux" || len(end.Runners) != 1 {
		t.Errorf("rejected requests changed the pool: bounds %+v, %d runners", end.Bounds, len(end.Runners))
	}
}

// A runner workflow that ends without reporting (terminated by hand) is found by the pool's
// check of its runners' workflows (Temporal's visibility lists it terminated), and the pool
// forgets and replaces it, once the grace for a report in flight has passed.
func TestPoolReplacesRunnerThatEndedWithoutReport(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	h.vanish[RunnerName("linux", Generation(""), 1)] = true
	end := h.run(spec, 2*time.Minute)
	if len(end.Runners) != 1 || end.Totals.Started != 2 {
		t.Fatalf("runners %s, totals %+v; want the vanished runner replaced", describeRunners(end), end.Totals)
	}
	if len(end.Finished) != 1 || !strings.Contains(end.Finished[0].Reason, "without a report") {
		t.Errorf("finished %+v", end.Finished)
	}
}

// Runners that fail in a row make the pool wait longer and longer before the next start; a
// runner that comes online resets the backoff.
func TestPoolBacksOffAfterFailedRunners(t *testing.T) {
	h := newPoolHarness(t, 0)
	h.failRegistration = true
	h.at(5*time.Minute, func() { h.failRegistration = false })
	// Runners fail 10s after they start: at 10s, 50s, 2m and 4m10s; backoff 30s, 1m, 2m, 4m.
	h.check(35*time.Second, "held 30s after the first failure", func(st PoolStatus) bool {
		return len(st.Runners) == 0 && strings.Contains(st.Why, "starts held until")
	})
	h.check(45*time.Second, "second runner started", func(st PoolStatus) bool { return len(st.Runners) == 1 })
	h.check(105*time.Second, "held a minute after the second failure", func(st PoolStatus) bool { return len(st.Runners) == 0 })
	h.check(115*time.Second, "third runner started", func(st PoolStatus) bool { return len(st.Runners) == 1 })
	h.check(8*time.Minute, "held four minutes after the fourth failure", func(st PoolStatus) bool { return len(st.Runners) == 0 })
	h.check(8*time.Minute+40*time.Second, "fifth runner online", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 1 })
	end := h.run(poolTestSpec(), 10*time.Minute)
	if end.Totals.Failed != 4 || end.Totals.Started != 5 || len(end.Runners) != 1 {
		t.Errorf("totals %+v, runners %d; want 4 failed, 5 started, 1 running", end.Totals, len(end.Runners))
	}
}

// The pool keeps the search attributes the starter routes by equal to its spec: set at start,
// changed when an applied spec changes them, and not rewritten otherwise.
func TestPoolSearchAttributes(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.Labels = []string{"Linux", "X64"}
	next := spec
	next.Labels = []string{"linux", "gpu"}
	next.RunnerGroup = "ml"
	var upserts []temporal.SearchAttributes
	h.onSegment = func() {
		h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
			upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
		}).Return(nil)
	}
	h.at(5*time.Minute, func() { h.update("apply", UpdateApply, ApplyRequest{Spec: next}) })
	h.run(spec, 10*time.Minute)
	if len(upserts) != 2 {
		t.Fatalf("%d upserts, want 2 (start and the applied spec)", len(upserts))
	}
	first, second := upserts[0], upserts[1]
	if v, _ := first.GetKeyword(SearchAttrPool); v != "linux" {
		t.Errorf("RunnerPool = %q", v)
	}
	if v, _ := first.GetKeyword(SearchAttrPoolScope); v != "org:acme" {
		t.Errorf("RunnerPoolScope = %q", v)
	}
	if v, _ := first.GetKeywordList(SearchAttrPoolLabels); strings.Join(v, ",") != "linux,x64" {
		t.Errorf("RunnerPoolLabels = %v, want lower-cased labels", v)
	}
	if v, _ := second.GetKeywordList(SearchAttrPoolLabels); strings.Join(v, ",") != "linux,gpu" {
		t.Errorf("after apply RunnerPoolLabels = %v", v)
	}
	if v, _ := second.GetKeyword(SearchAttrPoolGroup); v != "ml" {
		t.Errorf("after apply RunnerPoolGroup = %q", v)
	}
}

// The pool watches its runners' registration deadlines: a runner that has not reported idle or
// busy within its registration timeout is asked to check its registration, once per timeout,
// and one that reported is never asked.
func TestPoolAsksOverdueRunnersToCheckTheirRegistration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       PoolRunner
		wantDue time.Time
	}{
		{name: "pending since its start", r: PoolRunner{Watched: true, Started: true, State: RunnerPending, StartedAt: rnT0},
			wantDue: rnT0.Add(10 * time.Minute)},
		{name: "asked once, asked again a timeout later", r: PoolRunner{Watched: true, Started: true, State: RunnerRegistering, StartedAt: rnT0, CheckAskedAt: rnT0.Add(10 * time.Minute)},
			wantDue: rnT0.Add(20 * time.Minute)},
		{name: "idle", r: PoolRunner{Watched: true, Started: true, State: RunnerIdle, StartedAt: rnT0}},
		{name: "busy", r: PoolRunner{Watched: true, Started: true, State: RunnerBusy, StartedAt: rnT0}},
		{name: "draining", r: PoolRunner{Watched: true, Started: true, Draining: true, State: RunnerPending, StartedAt: rnT0}},
		{name: "its workflow not started yet", r: PoolRunner{Watched: true, State: RunnerPending, StartedAt: rnT0}},
		{name: "started before the pool watched", r: PoolRunner{Started: true, State: RunnerPending, StartedAt: rnT0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := registrationCheckDue(tc.r, 10*time.Minute); !got.Equal(tc.wantDue) {
				t.Errorf("registrationCheckDue = %v, want %v", got, tc.wantDue)
			}
		})
	}
}

// A runner that never reports is asked, through the pool's own wake-up, one registration
// timeout after its start; runners that reported are not.
func TestPoolSignalsCheckRegistrationToASilentRunner(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	silent := RunnerName("linux", Generation(""), 1)
	h.silence(silent)
	h.run(spec, spec.RegistrationTimeoutOrDefault()+time.Minute)
	asked := h.checksAsked()
	if len(asked) != 1 || asked[0].runner != silent {
		t.Fatalf("check-registration signals %+v, want one to %s", asked, silent)
	}
	if want := h.start.Add(spec.RegistrationTimeoutOrDefault()); asked[0].at.Before(want) || asked[0].at.After(want.Add(time.Minute)) {
		t.Errorf("asked at %v, want about %v (one registration timeout after its start)", asked[0].at, want)
	}
}

// A scale window's batch that arrives as a signal (changeSignalPool) reserves and releases as
// the update did: queued jobs start runners, their completed events end the reservations, and a
// batch delivered twice changes nothing.
func TestPoolTakesReservationBatchesBySignal(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(5), ptr(false)
	queued := reserve(JobQueued, 11, 12)
	queued.WindowID = "scale-window/linux/run-1/opening"
	h.at(time.Minute, func() { h.signal(SignalReservations, queued) })
	h.at(time.Minute+time.Second, func() { h.signal(SignalReservations, queued) })
	h.check(2*time.Minute, "two runners for two queued jobs", func(st PoolStatus) bool {
		return st.Reservations == 2 && len(st.Runners) == 2
	})
	h.at(3*time.Minute, func() { h.signal(SignalReservations, reserve(JobCompleted, 11, 12)) })
	end := h.run(spec, 4*time.Minute)
	if end.Reservations != 0 || end.Totals.Started != 2 {
		t.Errorf("at the end: %d reservations, %d runners started; want 0 and 2", end.Reservations, end.Totals.Started)
	}
}

// A listing's news reaches the runner it concerns: in one SignalRunnerStatuses activity per
// batch since changeListingTellsInBatches, by a signal of the pool's own before it; and a runner
// whose workflow ended without a report is forgotten when the news does not reach it, either way.
func TestPoolTellsRunnersTheirListing(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("before the change %v", before), func(t *testing.T) {
			h := newPoolHarness(t, 0)
			if before {
				h.onSegment = func() {
					h.env.OnGetVersion(changeListingTellsInBatches, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				}
			}
			name := RunnerName("linux", Generation(""), 1)
			h.silence(name) // started, never reports: only the listing says it is online
			h.at(30*time.Second, func() { h.addOrphan(RunnerListing{Name: name, Online: true}) })
			h.check(2*time.Minute, "the runner told it is online", func(PoolStatus) bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return slices.Contains(h.told, RunnerStatusUpdate{Runner: name, Status: RunnerStatusSignal{Online: true}})
			})
			h.at(2*time.Minute+time.Second, func() { // its workflow ends without a report; GitHub forgets it
				h.mu.Lock()
				defer h.mu.Unlock()
				h.sim[name].state = RunnerDone
				h.extraListed = nil
			})
			h.check(3*time.Minute, "the runner forgotten", func(st PoolStatus) bool {
				return !slices.ContainsFunc(st.Runners, func(r PoolRunner) bool { return r.Name == name }) &&
					slices.ContainsFunc(st.Finished, func(f FinishedRunner) bool {
						return f.Name == name && strings.Contains(f.Reason, "not found when")
					})
			})
			h.run(poolTestSpec(), 4*time.Minute)
			if batched := h.statusBatches > 0; batched == before {
				t.Errorf("%d SignalRunnerStatuses activities, before the change: %v", h.statusBatches, before)
			}
		})
	}
}

// A busy ephemeral runner that a listing no longer has is not told it is gone since
// changeListingTellsInBatches: its registration went with its job, which it learns itself;
// told, it would ask GitHub by its id. Before the change it was told.
func TestPoolDoesNotTellABusyEphemeralRunnerItIsGone(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("before the change %v", before), func(t *testing.T) {
			h := newPoolHarness(t, 0)
			if before {
				h.onSegment = func() {
					h.env.OnGetVersion(changeListingTellsInBatches, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				}
			}
			spec := poolTestSpec()
			spec.Ephemeral = ptr(true)
			name := RunnerName("linux", Generation(""), 1)
			h.at(time.Minute, func() { h.startJobsWithIDs(7) })
			h.at(time.Minute+time.Second, func() { // GitHub removes it with its job; its workflow runs on
				h.mu.Lock()
				defer h.mu.Unlock()
				h.sim[name].state = RunnerRegistering // no longer listed, still running
			})
			h.run(spec, 2*time.Minute)
			h.mu.Lock()
			defer h.mu.Unlock()
			toldGone := slices.Contains(h.told, RunnerStatusUpdate{Runner: name, Status: RunnerStatusSignal{Gone: true}})
			if toldGone != before {
				t.Errorf("busy ephemeral runner told it is gone: %v; want %v (told %v)", toldGone, before, h.told)
			}
		})
	}
}
