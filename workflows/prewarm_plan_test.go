package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	prewarmRepo     = "acme/app"
	prewarmRunID    = 77
	prewarmWorkflow = "acme/app CI"
)

// prewarmEvent is one job event of the test run, at the given time after runStart.
func prewarmEvent(action string, jobID int64, name string, at time.Duration) WorkflowJobEvent {
	ev := WorkflowJobEvent{
		JobID: jobID, RunID: prewarmRunID, Action: action, Repository: prewarmRepo,
		HeadSHA: "0123abcd", WorkflowName: "CI", JobName: name, At: afterStart(at),
	}
	return ev
}

// completedEvent is a job's completed event, as GitHub sends it: with its start and end.
func completedEvent(jobID int64, name string, started, done time.Duration, conclusion string) WorkflowJobEvent {
	ev := prewarmEvent(JobCompleted, jobID, name, done)
	ev.StartedAt, ev.CompletedAt, ev.Conclusion = afterStart(started), afterStart(done), conclusion
	return ev
}

// prewarmRunning is the pool's memory of the pipeline run with lint and test queued at
// runStart and the graph read, with pipelineHistory's run times for the workflow.
func prewarmRunning(t *testing.T) PrewarmState {
	t.Helper()
	st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{
		prewarmEvent(JobQueued, 1, "lint", 0), prewarmEvent(JobQueued, 2, "test", 0),
	}, runStart)
	if toRead := RunsToRead(st); len(toRead) != 1 || toRead[0].RunID != prewarmRunID || toRead[0].HeadSHA != "0123abcd" {
		t.Fatalf("runs to read %+v, want the run, once", toRead)
	}
	g := pipelineGraph()
	g.Jobs[2].Name = "Build image" // GitHub shows the job by its name
	st = PrewarmGraphRead(st, prewarmRepo, prewarmRunID, ReadRunGraphResult{Graph: &g}, "")
	if len(RunsToRead(st)) != 0 {
		t.Fatal("a run whose graph was read is to be read again")
	}
	st.Durations = []WorkflowDurations{{Workflow: prewarmWorkflow, Jobs: pipelineHistory()}}
	return st
}

// lintAndTestTaken: the pool's runners took lint at runStart and test 10 s later.
var lintAndTestTaken = []TakenJob{{JobID: 1, At: runStart}, {JobID: 2, At: afterStart(10 * time.Second)}}

// planAt plans at the given time after runStart, with lint and test taken by the pool's
// runners, and the jobs taken given.
func planAt(st PrewarmState, at time.Duration, taken ...TakenJob) PrewarmPlan {
	return PlanPrewarm(PrewarmPlanInput{
		State: st, Now: afterStart(at), PoolLabels: []string{"linux", "large", "deploy"}, Taken: append(slices.Clone(lintAndTestTaken), taken...),
		StartLatency: 30 * time.Second, Grace: 2 * time.Minute,
	})
}

func warmedOver(st PrewarmState, jobID string) (PrewarmWarmed, bool) {
	for _, run := range st.Runs {
		for _, w := range run.Warmed {
			if w.JobID == jobID {
				return w, true
			}
		}
	}
	return PrewarmWarmed{}, false
}

// TestPlanPrewarmWarmsJustInTime follows the pipeline run: lint is predicted to end at 1:55
// and test at 5:10 (their starts plus the 25th percentile of their run times), so build is
// due at 5:10; its runner starts 30 s ahead (the start latency), the plan wakes for it, and
// when GitHub queues build its runner is the job's (no longer counted as predicted). Then
// deploy's four runners are due 3 min after build starts.
func TestPlanPrewarmWarmsJustInTime(t *testing.T) {
	m, s := time.Minute, time.Second
	st := prewarmRunning(t)

	early := planAt(st, 4*m)
	if early.Want != 0 || !early.WakeAt.Equal(afterStart(4*m+40*s)) {
		t.Fatalf("at 4:00: want %d, wake %v; want none, wake at 4:40 (build due 5:10 less 30 s)", early.Want, early.WakeAt)
	}
	if _, warmed := warmedOver(early.State, "build"); warmed {
		t.Fatal("at 4:00 build is remembered as warmed before its time")
	}

	due := planAt(early.State, 4*m+40*s)
	w, warmed := warmedOver(due.State, "build")
	if due.Want != 1 || !warmed || !w.ReadyBy.Equal(afterStart(5*m+10*s)) || w.Over != "" {
		t.Fatalf("at 4:40: want %d, build %+v (warmed %v); want one runner for build, due 5:10", due.Want, w, warmed)
	}
	// Its grace ends at 7:10; deploy is due 3 min after build is queued (8:10), warmed at 7:40.
	if !due.WakeAt.Equal(afterStart(7*m+10*s)) || !strings.Contains(due.Why, "build of acme/app run 77") {
		t.Errorf("at 4:40: wake %v, why %q; want 7:10 and build named", due.WakeAt, due.Why)
	}

	st = ObservePrewarm(due.State, []WorkflowJobEvent{
		completedEvent(1, "lint", 0, 2*m, "success"),
		completedEvent(2, "test", 10*s, 5*m+15*s, "success"),
		prewarmEvent(JobQueued, 3, "Build image", 5*m+16*s),
	}, afterStart(5*m+16*s))
	queued := planAt(st, 5*m+20*s)
	w, _ = warmedOver(queued.State, "build")
	if queued.Want != 0 || queued.Released != 0 || w.Over != WarmTaken {
		t.Fatalf("build queued: want %d, released %d, build %+v; want its runner the job's, nothing predicted or released", queued.Want, queued.Released, w)
	}
	// build queued, not started: it starts now (5:20), deploy is due at 8:20, warmed at 7:50.
	if !queued.WakeAt.Equal(afterStart(7*m + 50*s)) {
		t.Errorf("build queued: wake %v, want 7:50", queued.WakeAt)
	}
	// A runner of the pool took build at 5:20: deploy is due at 8:20, its runners from 7:50.
	buildTaken := TakenJob{JobID: 3, At: afterStart(5*m + 20*s)}
	if before := planAt(queued.State, 7*m+49*s, buildTaken); before.Want != 0 {
		t.Errorf("at 7:49: want %d, want none yet", before.Want)
	}
	deploy := planAt(queued.State, 7*m+50*s, buildTaken)
	if deploy.Want != 4 {
		t.Fatalf("at 7:50: want %d, want deploy's four runners", deploy.Want)
	}
	// deploy's instances are queued by events of their own, here in two batches: the runners
	// of the two not heard of yet stay warm for them, and none is counted taken before all are.
	st = ObservePrewarm(deploy.State, []WorkflowJobEvent{
		completedEvent(3, "Build image", 5*m+20*s, 8*m+20*s, "success"),
		prewarmEvent(JobQueued, 4, "deploy (1)", 8*m+21*s), prewarmEvent(JobQueued, 5, "deploy (2)", 8*m+21*s),
	}, afterStart(8*m+21*s))
	half := planAt(st, 8*m+22*s, buildTaken)
	if w, _ := warmedOver(half.State, "deploy"); half.Want != 2 || half.Released != 0 || w.Over != "" || half.State.Counts.Taken != 1 {
		t.Fatalf("two of deploy's four queued: want %d, released %d, deploy %+v, taken %d; want the other two warm, build's runner alone taken",
			half.Want, half.Released, w, half.State.Counts.Taken)
	}
	st = ObservePrewarm(half.State, []WorkflowJobEvent{
		prewarmEvent(JobQueued, 6, "deploy (3)", 8*m+23*s), prewarmEvent(JobQueued, 7, "deploy (4)", 8*m+23*s),
	}, afterStart(8*m+23*s))
	all := planAt(st, 8*m+24*s, buildTaken)
	if w, _ := warmedOver(all.State, "deploy"); all.Want != 0 || all.Released != 0 || w.Over != WarmTaken || all.State.Counts.Taken != 5 {
		t.Errorf("all of deploy queued: want %d, released %d, deploy %+v, taken %d; want its four runners the jobs', counted taken",
			all.Want, all.Released, w, all.State.Counts.Taken)
	}
}

// TestPlanPrewarmReleases: runners warmed for a job go when a job it needs fails (it will be
// skipped) or when it is not queued by its due time plus the grace, and a job given up on is
// never warmed again in the run.
func TestPlanPrewarmReleases(t *testing.T) {
	m, s := time.Minute, time.Second
	for _, tc := range []struct {
		name     string
		events   []WorkflowJobEvent
		at       time.Duration
		want     int
		released int
		over     string
	}{
		{"still due: kept", nil, 7*m + 9*s, 1, 0, ""},
		{"test failed: build will be skipped", []WorkflowJobEvent{completedEvent(2, "test", 10*s, 4*m+50*s, "failure")}, 4*m + 51*s, 0, 1, WarmSkipped},
		{"lint cancelled: build will be skipped", []WorkflowJobEvent{completedEvent(1, "lint", 0, 3*m, "cancelled")}, 4*m + 51*s, 0, 1, WarmSkipped},
		{"not queued by due time plus grace: missed", nil, 7*m + 10*s, 0, 1, WarmMissed},
		{"test failed and build's skip heard with it", []WorkflowJobEvent{
			completedEvent(2, "test", 10*s, 4*m+50*s, "failure"),
			completedEvent(3, "Build image", 4*m+50*s, 4*m+50*s, "skipped"), // started_at set, as GitHub sends it
		}, 4*m + 51*s, 0, 1, WarmSkipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due := planAt(prewarmRunning(t), 4*m+40*s)
			st := due.State
			if len(tc.events) > 0 {
				st = ObservePrewarm(st, tc.events, afterStart(tc.at))
			}
			plan := planAt(st, tc.at)
			w, _ := warmedOver(plan.State, "build")
			if plan.Want != tc.want || plan.Released != tc.released || w.Over != tc.over {
				t.Fatalf("want %d, released %d, build %+v; want %d, %d, over %q", plan.Want, plan.Released, w, tc.want, tc.released, tc.over)
			}
			if tc.over == "" {
				return
			}
			// Predict, sliding, now says build is due at once; it is not warmed again.
			later := planAt(plan.State, tc.at+time.Minute)
			if later.Want != 0 || later.Released != 0 {
				t.Errorf("a minute later: want %d, released %d; want the job given up on, nothing released twice", later.Want, later.Released)
			}
		})
	}
}

// TestObservePrewarmRecordsRunTimes: a successful job's run time (GitHub's started_at to
// completed_at) is recorded once, under the file's job id, for the run's workflow; a failed
// job's is not, nor one whose name maps to no job; a job completed before the graph was read
// is recorded when it is.
func TestObservePrewarmRecordsRunTimes(t *testing.T) {
	m := time.Minute
	st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{
		completedEvent(1, "lint", 0, 2*m, "success"),
		completedEvent(2, "test", 0, 3*m, "failure"),
		completedEvent(5, "deploy (eu, web)", 0, 4*m, "success"),
		completedEvent(6, "lint / inner", 0, 5*m, "success"),
	}, afterStart(5*m))
	if len(st.Durations) != 0 {
		t.Fatalf("run times %+v recorded before the graph names the jobs", st.Durations)
	}
	g := pipelineGraph()
	st = PrewarmGraphRead(st, prewarmRepo, prewarmRunID, ReadRunGraphResult{Graph: &g}, "")
	st = ObservePrewarm(st, []WorkflowJobEvent{completedEvent(1, "lint", 0, 2*m, "success")}, afterStart(6*m))
	want := []JobDurations{{JobID: "lint", Durations: []time.Duration{2 * m}}, {JobID: "deploy", Durations: []time.Duration{4 * m}}}
	if len(st.Durations) != 1 || st.Durations[0].Workflow != prewarmWorkflow || !equalDurations(st.Durations[0].Jobs, want) {
		t.Errorf("run times %+v, want %s: %+v", st.Durations, prewarmWorkflow, want)
	}
}

func equalDurations(a, b []JobDurations) bool {
	return slices.EqualFunc(a, b, func(x, y JobDurations) bool { return x.JobID == y.JobID && slices.Equal(x.Durations, y.Durations) })
}

// TestPrewarmGraphRead: a run without a graph is never read again and predicts nothing.
func TestPrewarmGraphRead(t *testing.T) {
	big := RunGraph{Jobs: make([]RunGraphJob, PrewarmGraphJobsMax+1)}
	for _, tc := range []struct {
		name    string
		res     ReadRunGraphResult
		failure string
		noGraph string
	}{
		{"file missing", ReadRunGraphResult{NoGraph: RunGraphNotFound}, "", RunGraphNotFound},
		{"file invalid", ReadRunGraphResult{NoGraph: RunGraphInvalid}, "", RunGraphInvalid},
		{"read failed", ReadRunGraphResult{}, "rate limited", "read failed: rate limited"},
		{"too many jobs", ReadRunGraphResult{Graph: &big}, "", PrewarmTooManyJobs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{prewarmEvent(JobQueued, 1, "lint", 0)}, runStart)
			st = PrewarmGraphRead(st, prewarmRepo, prewarmRunID, tc.res, tc.failure)
			if st.Runs[0].Graph != nil || st.Runs[0].NoGraph != tc.noGraph || len(RunsToRead(st)) != 0 {
				t.Errorf("run %+v, want no graph (%q) and nothing to read", st.Runs[0], tc.noGraph)
			}
			if plan := planAt(st, time.Minute); plan.Want != 0 || len(plan.State.Runs) != 1 {
				t.Errorf("plan %+v: want nothing warmed, the run kept (not read again)", plan)
			}
		})
	}
}

// TestObservePrewarmForgets: events without the run's facts (older intakes) follow no run;
// a run not heard of for PrewarmRunIdleForget is forgotten, and beyond PrewarmRunsKept the
// least recently heard; a run whose jobs all completed with nothing left to warm is
// forgotten by the plan, its run times kept.
func TestObservePrewarmForgets(t *testing.T) {
	old := WorkflowJobEvent{JobID: 1, RunID: 9, Action: JobQueued, Repository: prewarmRepo}
	if st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{old}, runStart); len(st.Runs) != 0 {
		t.Errorf("an event without head sha followed: %+v", st.Runs)
	}
	st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{prewarmEvent(JobQueued, 1, "lint", 0)}, runStart)
	if kept := ObservePrewarm(st, nil, runStart.Add(PrewarmRunIdleForget-time.Second)); len(kept.Runs) != 1 {
		t.Error("a run heard of within the hour was forgotten")
	}
	if gone := ObservePrewarm(st, nil, runStart.Add(PrewarmRunIdleForget)); len(gone.Runs) != 0 {
		t.Error("a run not heard of for an hour was kept")
	}
	var many PrewarmState
	for i := range PrewarmRunsKept + 1 {
		ev := prewarmEvent(JobQueued, int64(i+1), "lint", 0)
		ev.RunID = int64(1000 + i)
		many = ObservePrewarm(many, []WorkflowJobEvent{ev}, afterStart(time.Duration(i)*time.Second))
	}
	if len(many.Runs) != PrewarmRunsKept || many.Runs[0].RunID != 1001 {
		t.Errorf("%d runs kept, first %d; want %d, the first heard forgotten", len(many.Runs), many.Runs[0].RunID, PrewarmRunsKept)
	}

	m := time.Minute
	done := ObservePrewarm(prewarmRunning(t), []WorkflowJobEvent{
		completedEvent(1, "lint", 0, 2*m, "success"),
		completedEvent(2, "test", 0, 3*m, "failure"),
	}, afterStart(3*m))
	plan := planAt(done, 3*m)
	if len(plan.State.Runs) != 0 || len(plan.State.Durations) != 1 {
		t.Errorf("finished run: runs %+v, run times %d; want the run forgotten, its run times kept", plan.State.Runs, len(plan.State.Durations))
	}
}

// TestGraphJobOf: GitHub's job names map to the file's ids, or to none when they cannot be
// told apart.
func TestGraphJobOf(t *testing.T) {
	g := RunGraph{Jobs: []RunGraphJob{
		{ID: "lint"},
		{ID: "build", Name: "Build image"},
		{ID: "deploy"},
		{ID: "e2e", Name: "E2E ${{ matrix.os }}", NameUnknown: true},
		{ID: "twin-a", Name: "Twin"},
		{ID: "twin-b", Name: "Twin"},
		{ID: "pkg"},
		{ID: "pkg-all", Name: "pkg (all)"},
	}}
	for _, tc := range []struct{ name, want string }{
		{"lint", "lint"},
		{"Build image", "build"},
		{"build", ""}, // named: GitHub shows the name, not the id
		{"deploy (eu, web)", "deploy"},
		{"deploy (a)", "deploy"}, // a one-dimension matrix: GitHub's name for region: [a, ...]
		{"E2E linux", ""},
		{"Twin", ""},
		{"lint / inner", ""},
		{"pkg (all)", "pkg-all"}, // a name that is exactly a job's beats a matrix instance's
		{"pkg (one)", "pkg"},
	} {
		got, ok := graphJobOf(g, tc.name)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("graphJobOf(%q) = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// TestStartLatency: runners start the declared default ahead until the pool has measured
// enough of its own starts, then its 75th percentile of the newest ones.
func TestStartLatency(t *testing.T) {
	s := time.Second
	var st PrewarmState
	for _, took := range []time.Duration{10 * s, 12 * s, 14 * s, 16 * s} {
		st = RecordStartLatency(st, took)
	}
	if got := StartLatency(st.StartLatencies); got != PrewarmStartLatency {
		t.Errorf("4 starts measured: %s, want the default %s", got, PrewarmStartLatency)
	}
	st = RecordStartLatency(st, 18*s)
	if got := StartLatency(st.StartLatencies); got != 16*s {
		t.Errorf("10..18 s measured: %s, want the 75th percentile, 16s", got)
	}
	for range PrewarmLatenciesKept {
		st = RecordStartLatency(st, 40*s)
	}
	if len(st.StartLatencies) != PrewarmLatenciesKept || StartLatency(st.StartLatencies) != 40*s {
		t.Errorf("kept %d starts, latency %s; want the newest %d, 40s", len(st.StartLatencies), StartLatency(st.StartLatencies), PrewarmLatenciesKept)
	}
	if got := RecordStartLatency(PrewarmState{}, -s).StartLatencies; got[0] != 0 {
		t.Errorf("a negative start (clock skew) kept as %s, want 0", got[0])
	}
}

// TestObservePrewarmBoundsARunsJobs: a run's jobs beyond PrewarmRunJobsKept are not kept.
func TestObservePrewarmBoundsARunsJobs(t *testing.T) {
	var events []WorkflowJobEvent
	for i := range PrewarmRunJobsKept + 1 {
		events = append(events, prewarmEvent(JobQueued, int64(i+1), "deploy (x)", 0))
	}
	st := ObservePrewarm(PrewarmState{}, events, runStart)
	if n := len(st.Runs[0].Jobs); n != PrewarmRunJobsKept {
		t.Errorf("%d jobs kept, want %d", n, PrewarmRunJobsKept)
	}
}

// TestPlanPrewarmCountsATakenJobOnce: a runner of the pool that took a job the pool has heard
// nothing of (the predicted build, its queued event still in the scale window) is counted by
// Decide as busy elsewhere; the plan takes it off the predicted runners, so no second runner
// starts for the same job.
func TestPlanPrewarmCountsATakenJobOnce(t *testing.T) {
	m, s := time.Minute, time.Second
	st := prewarmRunning(t)
	if plan := planAt(st, 4*m+40*s); plan.Want != 1 {
		t.Fatalf("want %d, want build's runner", plan.Want)
	}
	plan := planAt(st, 4*m+40*s, TakenJob{JobID: 999, At: afterStart(4*m + 39*s), Elsewhere: true})
	if plan.Want != 0 || !strings.Contains(plan.Why, "not heard of yet") {
		t.Errorf("want %d (%s), want none: the unheard job is counted once, by its runner", plan.Want, plan.Why)
	}
	// A job a reservation of the pool holds (or whose runner is done with it) is not busy
	// elsewhere: Decide counts it by its reservation, not beside the predicted runners.
	if plan := planAt(st, 4*m+40*s, TakenJob{JobID: 999, At: afterStart(4*m + 39*s)}); plan.Want != 1 {
		t.Errorf("want %d (%s), want build's runner: a reserved job takes none of it", plan.Want, plan.Why)
	}
}

// TestPlanPrewarmWarmsNothingForAJobItCannotTell: a job whose events cannot be mapped back to
// it (a name with an expression; a name two jobs share) would never be seen queued, so a
// runner warmed for it would be counted beside its reservation until the grace ran out. It
// is predicted nothing, and neither is a job that needs it: no runner is warmed at the time
// build would have been (4:40), nor once its events come, nor when deploy would have been.
func TestPlanPrewarmWarmsNothingForAJobItCannotTell(t *testing.T) {
	m, s := time.Minute, time.Second
	for _, tc := range []struct {
		name    string
		edit    func(g *RunGraph)
		events  []string // the names GitHub gives build's (and its twin's) events
		untold  []string // the jobs predicted nothing for their names
		because string
	}{
		{
			name: "build's name has an expression",
			edit: func(g *RunGraph) {
				g.Jobs[2].Name, g.Jobs[2].NameUnknown = "Build ${{ inputs.target }}", true
			},
			events:  []string{"Build web"},
			untold:  []string{"build"},
			because: "known only in the run",
		},
		{
			name: "build and package share a name",
			edit: func(g *RunGraph) {
				g.Jobs[2].Name = "Build"
				g.Jobs = append(g.Jobs, RunGraphJob{ID: "package", Name: "Build", Needs: []string{"test"},
					Labels: []string{"self-hosted", "linux"}, LabelsKnown: true, Instances: 1})
			},
			events:  []string{"Build", "Build"},
			untold:  []string{"build", "package"},
			because: "cannot be told apart",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{
				prewarmEvent(JobQueued, 1, "lint", 0), prewarmEvent(JobQueued, 2, "test", 0),
			}, runStart)
			g := pipelineGraph()
			tc.edit(&g)
			st = PrewarmGraphRead(st, prewarmRepo, prewarmRunID, ReadRunGraphResult{Graph: &g}, "")
			st.Durations = []WorkflowDurations{{Workflow: prewarmWorkflow, Jobs: append(pipelineHistory(),
				JobDurations{JobID: "package", Durations: pipelineHistory()[2].Durations})}}

			preds := Predict(PredictInput{Graph: *st.Runs[0].Graph, Observed: st.Runs[0].observed(lintAndTestTaken),
				History: st.history(st.Runs[0]), PoolLabels: []string{"linux", "large", "deploy"}, Now: afterStart(4*m + 40*s)})
			for _, id := range append(slices.Clone(tc.untold), "deploy") {
				i := slices.IndexFunc(preds, func(p JobPrediction) bool { return p.JobID == id })
				if i < 0 || preds[i].Kind != NotPredicted {
					t.Fatalf("%s: predictions %s; want it not predicted", id, describe(preds))
				}
				if slices.Contains(tc.untold, id) && !strings.Contains(preds[i].Why, tc.because) {
					t.Errorf("%s: why %q, want it to say %q", id, preds[i].Why, tc.because)
				}
			}

			plan := planAt(st, 4*m+40*s)
			if plan.Want != 0 || len(plan.State.Runs[0].Warmed) != 0 {
				t.Fatalf("at 4:40: want %d, warmed %+v; want no runner warmed", plan.Want, plan.State.Runs[0].Warmed)
			}
			var events []WorkflowJobEvent
			for i, name := range tc.events {
				events = append(events, prewarmEvent(JobQueued, int64(3+i), name, 5*m+16*s))
			}
			st = ObservePrewarm(plan.State, append([]WorkflowJobEvent{
				completedEvent(1, "lint", 0, 2*m, "success"),
				completedEvent(2, "test", 10*s, 5*m+15*s, "success"),
			}, events...), afterStart(5*m+16*s))
			for _, at := range []time.Duration{5*m + 20*s, 7*m + 50*s, 9 * m} {
				taken := TakenJob{JobID: 3, At: afterStart(5*m + 20*s)}
				if plan = planAt(st, at, taken); plan.Want != 0 || len(plan.State.Runs[0].Warmed) != 0 {
					t.Fatalf("at %s: want %d, warmed %+v; want no runner warmed (its queued job has its reservation's)", at, plan.Want, plan.State.Runs[0].Warmed)
				}
				st = plan.State
			}
		})
	}
}

// TestPrewarmStateWorstCaseFits: a pool's prewarm memory with every bound at its worst —
// PrewarmRunsKept runs, each with the largest graph boundRunGraph keeps, PrewarmRunJobsKept
// jobs heard under names as long as a workflow file allows and costly to write in JSON,
// every job warmed for, the run times of PrewarmWorkflowsKept workflows and the paths of
// PrewarmPathsKept — marshals
// within PrewarmStateBytesMax, well below the 2 MB Temporal takes in a payload.
func TestPrewarmStateWorstCaseFits(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	id := func(i int) string { return fmt.Sprintf("%02d", i) + long("x", PrewarmGraphTextMax-2) }
	// The largest graph kept: jobs as long as kept, each needing every job before it, added
	// while boundRunGraph keeps the graph.
	var graph RunGraph
	for i := range PrewarmGraphJobsMax {
		j := RunGraphJob{ID: id(i), Name: long("<", 10_000), If: long("&", 10_000), LabelsKnown: true, Instances: 256}
		for range PrewarmGraphLabelsMax {
			j.Labels = append(j.Labels, long("l", PrewarmGraphTextMax))
		}
		for k := range i {
			j.Needs = append(j.Needs, id(k))
		}
		bigger := RunGraph{Jobs: append(slices.Clone(graph.Jobs), j)}
		if _, ok := boundRunGraph(bigger); !ok {
			break
		}
		graph = bigger
	}
	if len(graph.Jobs) == 0 {
		t.Fatal("no job at the caps is kept")
	}
	repo := long("o", 39) + "/" + long("r", 100)
	var st PrewarmState
	for r := range PrewarmRunsKept {
		var events []WorkflowJobEvent
		for j := range PrewarmRunJobsKept + 1 {
			ev := prewarmEvent(JobCompleted, math.MaxInt64-int64(r*1000+j), long("<", 10_000)+")", time.Minute)
			ev.RunID, ev.Repository, ev.HeadSHA = math.MaxInt64-int64(r), repo, long("f", 64)
			ev.WorkflowName, ev.Conclusion = long("\"", 10_000), "action_required"
			ev.StartedAt, ev.CompletedAt = afterStart(time.Second), afterStart(time.Minute)
			events = append(events, prewarmEvent(JobQueued, ev.JobID, ev.JobName, 0), ev)
			events[len(events)-2].RunID, events[len(events)-2].Repository, events[len(events)-2].HeadSHA = ev.RunID, repo, ev.HeadSHA
		}
		st = ObservePrewarm(st, events, afterStart(time.Minute))
		st = PrewarmGraphRead(st, repo, math.MaxInt64-int64(r), ReadRunGraphResult{Graph: &graph}, "")
		if st.Runs[r].Graph == nil {
			t.Fatalf("run %d: graph refused (%s)", r, st.Runs[r].NoGraph)
		}
		for i := range PrewarmGraphJobsMax {
			st.Runs[r].Warmed = append(st.Runs[r].Warmed, PrewarmWarmed{JobID: id(i), Runners: 256, ReadyBy: afterStart(time.Hour), Over: WarmMissed})
		}
	}
	if len(st.Runs) != PrewarmRunsKept || len(st.Runs[0].Jobs) != PrewarmRunJobsKept {
		t.Fatalf("%d runs of %d jobs, want %d of %d", len(st.Runs), len(st.Runs[0].Jobs), PrewarmRunsKept, PrewarmRunJobsKept)
	}
	for w := range PrewarmWorkflowsKept {
		d := WorkflowDurations{Workflow: fmt.Sprintf("%d %s %s", w, repo, st.Runs[0].Workflow), LastRun: afterStart(time.Hour)}
		for j := range PrewarmJobsKept {
			durations := make([]time.Duration, PrewarmDurationsKept)
			for k := range durations {
				durations[k] = 5*24*time.Hour + time.Duration(k) // a job runs five days at most
			}
			d.Jobs = append(d.Jobs, JobDurations{JobID: id(j), Durations: durations})
		}
		st.Durations = append(st.Durations, d)
	}
	for range PrewarmLatenciesKept {
		st = RecordStartLatency(st, time.Hour)
	}
	// The paths remembered: as many workflows as kept, under the longest name and path
	// rememberPath keeps, costly to write in JSON.
	for w := range PrewarmPathsKept + 1 {
		run := PrewarmRun{Repository: repo, Workflow: fmt.Sprintf("%03d", w) + long("<", (PrewarmSeenNameMax-3-3)/6)}
		st.rememberPath(run, long("&", PrewarmPathMax/6))
	}
	if len(st.Paths) != PrewarmPathsKept {
		t.Fatalf("%d paths remembered at the caps, want %d", len(st.Paths), PrewarmPathsKept)
	}
	st.Released, st.ReleasedUntil = math.MaxInt, afterStart(time.Hour)

	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case prewarm state: %d bytes (graph of %d jobs, %d bytes)", len(b), len(graph.Jobs), len(mustJSON(t, *st.Runs[0].Graph)))
	if len(b) > PrewarmStateBytesMax {
		t.Errorf("worst-case prewarm state takes %d bytes, over PrewarmStateBytesMax (%d)", len(b), PrewarmStateBytesMax)
	}
	if PrewarmStateBytesMax > 1<<20 {
		t.Errorf("PrewarmStateBytesMax %d leaves too little of a 2 MB payload to the rest of the pool's state", PrewarmStateBytesMax)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPrewarmGraphReadBoundsTheGraph: a graph's strings are kept within their caps (a long
// name leaves the job untold, long or many labels leave its pool unknown, an if: is kept
// cut, still there), and a graph whose kept form is over PrewarmGraphBytesMax, or with an id
// over PrewarmGraphTextMax, is refused with its own reason: the run predicts nothing.
func TestPrewarmGraphReadBoundsTheGraph(t *testing.T) {
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	read := func(g RunGraph) PrewarmState {
		st := ObservePrewarm(PrewarmState{}, []WorkflowJobEvent{prewarmEvent(JobQueued, 1, "lint", 0)}, runStart)
		return PrewarmGraphRead(st, prewarmRepo, prewarmRunID, ReadRunGraphResult{Graph: &g}, "")
	}

	g := pipelineGraph()
	g.Jobs[2].Name = long("B", 200_000)
	g.Jobs[2].If = long("<", 200_000)
	g.Jobs[3].Labels = append(g.Jobs[3].Labels, long("l", PrewarmGraphTextMax+1))
	g.Jobs[1].Labels = make([]string, PrewarmGraphLabelsMax+1)
	kept := read(g).Runs[0].Graph
	if kept == nil {
		t.Fatal("a graph with long strings refused, want it kept cut")
	}
	build, deploy, test := kept.Jobs[2], kept.Jobs[3], kept.Jobs[1]
	if !build.NameUnknown || len(build.Name) > PrewarmGraphTextMax || build.If == "" || len(build.If) > PrewarmGraphTextMax {
		t.Errorf("build kept as %+v: want its name cut and untold, its if: cut and kept", build)
	}
	if deploy.LabelsKnown || !deploy.LabelsCut || deploy.Labels != nil || test.LabelsKnown || !test.LabelsCut {
		t.Errorf("deploy kept as %+v, test as %+v: want their labels dropped, cut", deploy, test)
	}
	if len(g.Jobs[2].Name) != 200_000 {
		t.Error("the graph read was changed")
	}
	preds := Predict(PredictInput{Graph: *kept, Observed: running(), History: pipelineHistory(), PoolLabels: []string{"linux", "large", "deploy"}, Now: afterStart(5 * time.Minute)})
	for _, p := range preds {
		if p.Kind != NotPredicted {
			t.Errorf("prediction %s; want nothing predicted for the cut jobs", describe([]JobPrediction{p}))
		}
	}

	wide := pipelineGraph()
	for i := range PrewarmGraphJobsMax - len(wide.Jobs) {
		wide.Jobs = append(wide.Jobs, RunGraphJob{ID: fmt.Sprintf("job-%02d", i), Needs: []string{"lint", "test", "build"}, Name: long("n", PrewarmGraphTextMax),
			Labels: []string{"self-hosted", "linux"}, LabelsKnown: true, Instances: 1})
	}
	longID := pipelineGraph()
	longID.Jobs[0].ID = long("i", PrewarmGraphTextMax+1)
	for name, g := range map[string]RunGraph{"over the byte budget": wide, "an id too long": longID} {
		st := read(g)
		if st.Runs[0].Graph != nil || st.Runs[0].NoGraph != PrewarmGraphTooLarge || len(RunsToRead(st)) != 0 {
			t.Errorf("%s: run %+v, want no graph (%q), not read again", name, st.Runs[0].NoGraph, PrewarmGraphTooLarge)
		}
		if plan := planAt(st, 5*time.Minute); plan.Want != 0 {
			t.Errorf("%s: want %d, want nothing warmed", name, plan.Want)
		}
	}
}

// TestPrewarmSeenNameMapsAsWhole: a heard job's name cut to PrewarmSeenNameMax maps to the
// file's job as the whole name does: a long matrix instance's to its job, a long name of no
// job to none.
func TestPrewarmSeenNameMapsAsWhole(t *testing.T) {
	g := RunGraph{Jobs: []RunGraphJob{{ID: "deploy", Name: strings.Repeat("<", PrewarmGraphTextMax/6)}, {ID: "lint"}}}
	for _, name := range []string{
		g.Jobs[0].Name + " (" + strings.Repeat("&", 10_000) + ")",
		"lint (" + strings.Repeat("v", 10_000) + ")",
		strings.Repeat("lint", 10_000),
		"lint (" + strings.Repeat("v", 10_000),
	} {
		cut := seenName(name)
		if c, _ := capText(cut, PrewarmSeenNameMax, ""); c != cut {
			t.Errorf("%.20q... kept as %d bytes, over PrewarmSeenNameMax", name, len(cut))
		}
		wantID, wantOK := graphJobOf(g, name)
		if id, ok := graphJobOf(g, cut); id != wantID || ok != wantOK {
			t.Errorf("%.20q... cut maps to %q %v, the whole to %q %v", name, id, ok, wantID, wantOK)
		}
	}
}
