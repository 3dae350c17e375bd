package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFaultPlanRepeatsFromItsSeed: one seed, one plan; the plan has the faults (one
// Temporal restart, session expiry, reassignment window and rolling deploy, the others three
// times in ten minutes, at least once in a short soak), each within its bounds, one after
// another inside the queueing window.
func TestFaultPlanRepeatsFromItsSeed(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		each int
	}{{10 * time.Minute, 3}, {4 * time.Minute, 1}, {3 * time.Minute, 1}, {2 * time.Minute, 1}, {time.Minute, 1}} {
		plan := planFaults(42, tc.d)
		if again := planFaults(42, tc.d); !reflect.DeepEqual(plan, again) {
			t.Errorf("%s: seed 42 gave two plans:\n%+v\n%+v", tc.d, plan, again)
		}
		kinds := map[faultKind]int{}
		var end time.Duration
		for i, f := range plan {
			kinds[f.Kind]++
			if f.At < end {
				t.Errorf("%s: fault %d (%s) at %s starts before the one before it ends (%s)", tc.d, i, f.Kind, f.At, end)
			}
			if f.At < tc.d/10 {
				t.Errorf("%s: fault %d (%s) at %s, before the first tenth of the soak", tc.d, i, f.Kind, f.At)
			}
			end = f.At + f.For + faultOverhead[f.Kind]
			checkFaultBounds(t, f)
		}
		want := map[faultKind]int{faultTemporalRestart: 1, faultSessionExpiry: 1, faultReassignment: 1, faultRollingDeploy: 1,
			faultWorkerKill: tc.each, faultAPIServerPause: tc.each, faultGitHub5xx: tc.each, faultActions5xx: tc.each}
		if !reflect.DeepEqual(kinds, want) {
			t.Errorf("%s: faults %v, want %v", tc.d, kinds, want)
		}
		// Soaks of 4 and 10 minutes have room for all their faults, however long each is drawn;
		// in a shorter one the last may end after the queueing.
		if tc.d >= 4*time.Minute && end > tc.d {
			t.Errorf("%s: the last fault ends at %s, after the queueing", tc.d, end)
		}
	}
	if reflect.DeepEqual(planFaults(1, 10*time.Minute), planFaults(2, 10*time.Minute)) {
		t.Error("seeds 1 and 2 gave the same plan")
	}
}

// faultBounds are each kind's shortest and longest outage.
var faultBounds = map[faultKind][2]time.Duration{
	faultWorkerKill:      {workerDownMin, workerDownMax},
	faultTemporalRestart: {temporalDown, temporalDown},
	faultAPIServerPause:  {apiPauseMin, apiPauseMax},
	faultGitHub5xx:       {github5xxMin, github5xxMax},
	faultActions5xx:      {actions5xxMin, actions5xxMax},
	faultSessionExpiry:   {0, 0},
	faultReassignment:    {reassignWindowMin, reassignWindowMax},
	faultRollingDeploy:   {0, 0},
}

func checkFaultBounds(t *testing.T, f plannedFault) {
	t.Helper()
	b := faultBounds[f.Kind]
	if f.For < b[0] || f.For > b[1] {
		t.Errorf("%s lasts %s, want %s to %s", f.Kind, f.For, b[0], b[1])
	}
	if (f.Kind == faultGitHub5xx || f.Kind == faultActions5xx) != (f.Status >= 500 && f.Status <= 599) {
		t.Errorf("%s answers %d", f.Kind, f.Status)
	}
}

// TestSoakProblemsNameEveryCount: a soak passes only at rest with every count at 0, and each
// count that is not 0 is named.
func TestSoakProblemsNameEveryCount(t *testing.T) {
	clean := SoakResult{Converged: true, ConvergeSeconds: 40, RunnerLifecycles: 1003, LifecyclesPerJob: 1.003, RemovalsRefusedBusy: 2}
	if p := clean.problems(); len(p) != 0 {
		t.Errorf("a clean soak has problems %q", p)
	}
	bad := SoakResult{
		ConvergeSeconds: 1200, JobsWithoutRunner: []int64{7}, Orphans: []string{"pod/soak-a-1f2e-3", "secret/soak-a-1f2e-3"},
		OpenRunnerWorkflows: []string{"runner/soak-a/soak-a-1f2e-3"}, BusyRunnersRemoved: []int64{9},
		DuplicatePods: []string{"soak-b-0a0b-1 (2 pods)"}, RunnersWithTwoJobs: []string{"soak-b-0a0b-2 (2 jobs)"}, UngracefulStops: 1,
	}
	got := strings.Join(bad.problems(), "; ")
	want := "not at rest 1200 s after the last fault; 1 jobs without a runner; 2 orphans; 1 runner workflows still open; " +
		"1 busy runners removed (jobs failed); 1 duplicate pods; 1 runners that ran two jobs; " +
		"1 workers killed after their SIGTERM in a rolling deploy"
	if got != want {
		t.Errorf("problems:\n got %s\nwant %s", got, want)
	}
}

func TestSoakFlags(t *testing.T) {
	opts, _, err := parseFlags([]string{"--soak", "--soak-jobs", "60", "--soak-duration", "2m", "--soak-seed", "7", "--skip", "burst,throughput,memory"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s := opts.Soak; !s.Run || s.Jobs != 60 || s.Duration != 2*time.Minute || s.Seed != 7 {
		t.Errorf("soak options %+v", s)
	}
	if _, _, err := parseFlags([]string{"--soak", "--soak-duration", "30s"}, io.Discard); err == nil {
		t.Error("a 30-second soak was accepted")
	}
	if _, _, err := parseFlags([]string{"--soak-duration", "30s"}, io.Discard); err != nil {
		t.Errorf("soak settings without --soak refused: %v", err)
	}
}
