package workflows

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// runStart is when the test run's first jobs started.
var runStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func afterStart(d time.Duration) time.Time { return runStart.Add(d) }

// pipelineGraph is issue 39's run: lint and test, then build (needs both), then a 4-way
// matrix deploy.
func pipelineGraph() RunGraph {
	return RunGraph{Jobs: []RunGraphJob{
		{ID: "lint", Labels: []string{"self-hosted", "linux"}, LabelsKnown: true, Instances: 1},
		{ID: "test", Labels: []string{"self-hosted", "linux"}, LabelsKnown: true, Instances: 1},
		{ID: "build", Needs: []string{"lint", "test"}, Labels: []string{"self-hosted", "linux", "large"}, LabelsKnown: true, Instances: 1},
		{ID: "deploy", Needs: []string{"build"}, Labels: []string{"self-hosted", "deploy"}, LabelsKnown: true, Instances: 4},
	}}
}

// pipelineHistory: with the 25th percentile by nearest rank, lint takes 1m55s (second of
// five), test 5m (second of eight) and build 3m (second of five).
func pipelineHistory() []JobDurations {
	m := time.Minute
	s := time.Second
	return []JobDurations{
		{JobID: "lint", Durations: []time.Duration{2 * m, 2*m + 10*s, m + 50*s, 2*m + 5*s, m + 55*s}},
		{JobID: "test", Durations: []time.Duration{5 * m, 6 * m, 5*m + 30*s, 4 * m, 5*m + 10*s, 5*m + 20*s, 5*m + 40*s, 7 * m}},
		{JobID: "build", Durations: []time.Duration{3 * m, 3*m + 20*s, 2*m + 50*s, 3*m + 10*s, 3*m + 5*s}},
	}
}

// running says both roots started: lint at runStart, test 10 s later.
func running() []ObservedJob {
	return []ObservedJob{
		{JobID: "lint", Queued: runStart, Started: runStart},
		{JobID: "test", Queued: runStart, Started: afterStart(10 * time.Second)},
	}
}

func finishedJob(id string, started, done time.Duration, conclusion string) ObservedJob {
	return ObservedJob{JobID: id, Queued: afterStart(started), Started: afterStart(started), Completed: afterStart(done), Conclusion: conclusion}
}

// predictionCase is one table row: the pipeline, changed by edit, seen at now.
type predictionCase struct {
	name       string
	edit       func(in *PredictInput)
	now        time.Duration
	poolLabels []string
	want       []JobPrediction
}

func (tc predictionCase) run(t *testing.T) {
	t.Helper()
	in := PredictInput{
		Graph:      pipelineGraph(),
		Observed:   running(),
		History:    pipelineHistory(),
		PoolLabels: tc.poolLabels,
		Now:        afterStart(tc.now),
	}
	if in.PoolLabels == nil {
		in.PoolLabels = []string{"linux", "large", "deploy"}
	}
	if tc.edit != nil {
		tc.edit(&in)
	}
	got := Predict(in)
	if len(got) != len(tc.want) {
		t.Fatalf("got %d predictions, want %d:\n got %s", len(got), len(tc.want), describe(got))
	}
	for i, w := range tc.want {
		g := got[i]
		if g.JobID != w.JobID || g.Kind != w.Kind || !g.QueuedAt.Equal(w.QueuedAt) || g.Runners != w.Runners || g.After != w.After {
			t.Errorf("prediction %d:\n got %s\nwant %s", i, describe([]JobPrediction{g}), describe([]JobPrediction{w}))
		}
		// The reason is prose; the row names a phrase it must hold.
		if !strings.Contains(g.Why, w.Why) {
			t.Errorf("%s: why %q does not say %q", g.JobID, g.Why, w.Why)
		}
	}
}

func describe(ps []JobPrediction) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n  %s %s at runStart+%s, %d runners, after %q: %s", p.JobID, p.Kind, p.QueuedAt.Sub(runStart), p.Runners, p.After, p.Why)
	}
	return b.String()
}

func wantQueued(id string, after time.Duration, runners int, need, why string) JobPrediction {
	return JobPrediction{JobID: id, Kind: PredictedQueued, QueuedAt: afterStart(after), Runners: runners, After: need, Why: why}
}

func wantSkipped(id, need, why string) JobPrediction {
	return JobPrediction{JobID: id, Kind: PredictedSkipped, After: need, Why: why}
}

func wantUnknown(id, need, why string) JobPrediction {
	return JobPrediction{JobID: id, Kind: NotPredicted, After: need, Why: why}
}

func setObserved(obs ...ObservedJob) func(*PredictInput) {
	return func(in *PredictInput) { in.Observed = obs }
}

func editJob(id string, change func(*RunGraphJob)) func(*PredictInput) {
	return func(in *PredictInput) {
		for i := range in.Graph.Jobs {
			if in.Graph.Jobs[i].ID == id {
				change(&in.Graph.Jobs[i])
			}
		}
	}
}

func TestPredictPipeline(t *testing.T) {
	m, s := time.Minute, time.Second
	cases := []predictionCase{
		{
			// lint ends at 1m55s, test at 10s + 5m: build is queued when test ends, and
			// deploy 3m (build's p25) later with its four instances.
			name: "lint and test running: build after test, deploy after build",
			now:  m,
			want: []JobPrediction{
				wantQueued("build", 5*m+10*s, 1, "test", "test started at 12:00:10, p25 of its last 8 runs 5m0s"),
				wantQueued("deploy", 8*m+10*s, 4, "build", "build would start at 12:05:10"),
			},
		},
		{
			name: "a dependency running past its prediction is due now",
			edit: setObserved(finishedJob("lint", 0, 2*m, "success"), ObservedJob{JobID: "test", Queued: runStart, Started: afterStart(10 * s)}),
			now:  6 * m,
			want: []JobPrediction{
				wantQueued("build", 6*m, 1, "test", "test started"),
				wantQueued("deploy", 9*m, 4, "build", "build would start at 12:06:00"),
			},
		},
		{
			name: "completed dependencies: build is due at test's completion",
			edit: setObserved(finishedJob("lint", 0, 2*m, "success"), finishedJob("test", 10*s, 5*m+30*s, "success")),
			now:  5*m + 31*s,
			want: []JobPrediction{
				wantQueued("build", 5*m+30*s, 1, "test", "test completed at 12:05:30"),
				wantQueued("deploy", 8*m+31*s, 4, "build", "build would start at 12:05:31"),
			},
		},
		{
			name: "build running: only deploy is left to predict",
			edit: setObserved(finishedJob("lint", 0, 2*m, "success"), finishedJob("test", 10*s, 5*m+30*s, "success"),
				ObservedJob{JobID: "build", Queued: afterStart(5*m + 31*s), Started: afterStart(6 * m)}),
			now:  7 * m,
			want: []JobPrediction{wantQueued("deploy", 9*m, 4, "build", "build started at 12:06:00")},
		},
		{
			name: "build queued, no runner yet: it runs from now",
			edit: setObserved(finishedJob("lint", 0, 2*m, "success"), finishedJob("test", 10*s, 5*m+30*s, "success"),
				ObservedJob{JobID: "build", Queued: afterStart(5*m + 31*s)}),
			now:  7 * m,
			want: []JobPrediction{wantQueued("deploy", 10*m, 4, "build", "build is queued, not yet started")},
		},
		{
			name: "a failed dependency skips the chain: its runners can go",
			edit: setObserved(finishedJob("lint", 0, 2*m, "success"), finishedJob("test", 10*s, 4*m, "failure")),
			now:  4 * m,
			want: []JobPrediction{
				wantSkipped("build", "test", "test concluded failure"),
				wantSkipped("deploy", "build", "build will be skipped: test concluded failure"),
			},
		},
		{
			name: "a cancelled dependency skips as a failed one does",
			edit: setObserved(finishedJob("lint", 0, 30*s, "cancelled"), ObservedJob{JobID: "test", Queued: runStart, Started: runStart}),
			now:  m,
			want: []JobPrediction{
				wantSkipped("build", "lint", "lint concluded cancelled"),
				wantSkipped("deploy", "build", "build will be skipped: lint concluded cancelled"),
			},
		},
		{
			name: "a failure decides even beside a dependency without history",
			edit: func(in *PredictInput) {
				in.Observed = []ObservedJob{{JobID: "lint", Queued: runStart, Started: runStart}, finishedJob("test", 0, 4*m, "failure")}
				in.History = in.History[1:]
			},
			now: 4 * m,
			want: []JobPrediction{
				wantSkipped("build", "test", "test concluded failure"),
				wantSkipped("deploy", "build", "build will be skipped"),
			},
		},
		{
			name: "a dependency without enough history: no prediction down the chain",
			edit: func(in *PredictInput) { in.History[0].Durations = in.History[0].Durations[:4] },
			now:  m,
			want: []JobPrediction{
				wantUnknown("build", "lint", "lint has 4 recent run times, a prediction needs 5"),
				wantUnknown("deploy", "build", "lint has 4 recent run times"),
			},
		},
		{
			name: "build without history: build predicted, deploy not",
			edit: func(in *PredictInput) { in.History = in.History[:2] },
			now:  m,
			want: []JobPrediction{
				wantQueued("build", 5*m+10*s, 1, "test", "test started"),
				wantUnknown("deploy", "build", "build has 0 recent run times"),
			},
		},
		{
			name: "deploy's labels are known only in the run",
			edit: editJob("deploy", func(j *RunGraphJob) { j.Labels, j.LabelsKnown = nil, false }),
			now:  m,
			want: []JobPrediction{
				wantQueued("build", 5*m+10*s, 1, "test", "test started"),
				wantUnknown("deploy", "", "runs-on labels are known only in the run"),
			},
		},
		{
			name:       "deploy routes to another pool: this pool predicts build alone",
			now:        m,
			poolLabels: []string{"Linux", "LARGE"},
			want:       []JobPrediction{wantQueued("build", 5*m+10*s, 1, "test", "test started")},
		},
		{
			name:       "no job routes to the pool",
			now:        m,
			poolLabels: []string{"gpu"},
			want:       nil,
		},
		{
			name: "deploy's matrix size is known only in the run",
			edit: editJob("deploy", func(j *RunGraphJob) { j.Instances = 0 }),
			now:  m,
			want: []JobPrediction{
				wantQueued("build", 5*m+10*s, 1, "test", "test started"),
				wantUnknown("deploy", "", "matrix size is known only in the run"),
			},
		},
		{
			name: "build has an if: neither build nor deploy is predicted",
			edit: editJob("build", func(j *RunGraphJob) { j.If = "github.ref == 'refs/heads/main'" }),
			now:  m,
			want: []JobPrediction{
				wantUnknown("build", "", "it has an if: (github.ref == 'refs/heads/main')"),
				wantUnknown("deploy", "build", "build has an if: and is not queued"),
			},
		},
		{
			name: "build has an if: and was queued: it ran, deploy is predicted",
			edit: func(in *PredictInput) {
				editJob("build", func(j *RunGraphJob) { j.If = "always()" })(in)
				in.Observed = append(in.Observed, ObservedJob{JobID: "build", Queued: afterStart(5 * m), Started: afterStart(5 * m)})
			},
			now:  6 * m,
			want: []JobPrediction{wantQueued("deploy", 8*m, 4, "build", "build started at 12:05:00")},
		},
		{
			name: "a job with an if: is not skipped for a failure: always() would run it",
			edit: func(in *PredictInput) {
				editJob("build", func(j *RunGraphJob) { j.If = "always()" })(in)
				in.Observed = []ObservedJob{finishedJob("lint", 0, m, "success"), finishedJob("test", 0, 2*m, "failure")}
			},
			now: 2 * m,
			want: []JobPrediction{
				wantUnknown("build", "", "it has an if: (always())"),
				wantUnknown("deploy", "build", "build has an if:"),
			},
		},
		{
			name: "needs and observed ids match case-insensitively",
			edit: func(in *PredictInput) {
				editJob("deploy", func(j *RunGraphJob) { j.Needs = []string{"Build"} })(in)
				in.Observed[1].JobID = "TEST"
				in.History[2].JobID = "BUILD"
			},
			now: m,
			want: []JobPrediction{
				wantQueued("build", 5*m+10*s, 1, "test", "test started"),
				wantQueued("deploy", 8*m+10*s, 4, "Build", "Build would start at 12:05:10"),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// TestPredictMatrixDependency: a job that needs a matrix waits for its last instance.
func TestPredictMatrixDependency(t *testing.T) {
	m := time.Minute
	graph := pipelineGraph()
	graph.Jobs = append(graph.Jobs, RunGraphJob{ID: "notify", Needs: []string{"deploy"}, Labels: []string{"linux"}, LabelsKnown: true, Instances: 1})
	history := append(pipelineHistory(), JobDurations{JobID: "deploy", Durations: []time.Duration{2 * m, 2 * m, 2 * m, 2 * m, 2 * m}})
	done := []ObservedJob{finishedJob("lint", 0, m, "success"), finishedJob("test", 0, 2*m, "success"), finishedJob("build", 2*m, 5*m, "success")}
	deploying := func(starts ...time.Duration) []ObservedJob {
		obs := slices.Clone(done)
		for _, s := range starts {
			obs = append(obs, ObservedJob{JobID: "deploy", Queued: afterStart(5 * m), Started: afterStart(s)})
		}
		return obs
	}
	cases := []predictionCase{
		{
			name: "every instance started: the last start counts",
			edit: setObserved(deploying(5*m, 6*m, 7*m, 5*m)...),
			now:  8 * m,
			want: []JobPrediction{wantQueued("notify", 9*m, 1, "deploy", "deploy started at 12:07:00")},
		},
		{
			name: "one instance still queued: it starts no sooner than now",
			edit: func(in *PredictInput) {
				in.Observed = append(deploying(5*m, 6*m, 7*m), ObservedJob{JobID: "deploy", Queued: afterStart(5 * m)})
			},
			now:  8 * m,
			want: []JobPrediction{wantQueued("notify", 10*m, 1, "deploy", "deploy is queued, not yet started")},
		},
		{
			name: "three of four instances completed: not done yet",
			edit: func(in *PredictInput) {
				in.Observed = append(slices.Clone(done),
					finishedJob("deploy", 5*m, 7*m, "success"), finishedJob("deploy", 5*m, 7*m, "success"),
					finishedJob("deploy", 5*m, 7*m, "success"), ObservedJob{JobID: "deploy", Queued: afterStart(5 * m), Started: afterStart(6 * m)})
			},
			now:  7 * m,
			want: []JobPrediction{wantQueued("notify", 8*m, 1, "deploy", "deploy started at 12:06:00")},
		},
		{
			name: "every instance completed: the last completion counts",
			edit: setObserved(append(slices.Clone(done),
				finishedJob("deploy", 5*m, 7*m, "success"), finishedJob("deploy", 5*m, 8*m, "success"),
				finishedJob("deploy", 5*m, 7*m, "success"), finishedJob("deploy", 5*m, 6*m, "success"))...),
			now:  8 * m,
			want: []JobPrediction{wantQueued("notify", 8*m, 1, "deploy", "deploy completed at 12:08:00")},
		},
		{
			name: "one instance failed while others run: notify is skipped",
			edit: func(in *PredictInput) {
				in.Observed = append(deploying(5*m, 5*m, 5*m), finishedJob("deploy", 5*m, 6*m, "failure"))
			},
			now:  6 * m,
			want: []JobPrediction{wantSkipped("notify", "deploy", "deploy concluded failure")},
		},
	}
	for _, tc := range cases {
		tc.poolLabels = []string{"linux"}
		in := tc.edit
		tc.edit = func(p *PredictInput) { p.Graph, p.History = graph, slices.Clone(history); in(p) }
		t.Run(tc.name, tc.run)
	}
}

// TestPredictQuantileFromPolicy: the policy's quantile and Kept choose the run time.
func TestPredictQuantileFromPolicy(t *testing.T) {
	s := time.Second
	// Ten run times of build, 1 s to 10 s, newest last, after an old 100 s one.
	var took []time.Duration
	for i := 1; i <= 10; i++ {
		took = append(took, time.Duration(i)*s)
	}
	history := []JobDurations{{JobID: "build", Durations: append([]time.Duration{100 * s}, took...)}}
	graph := RunGraph{Jobs: []RunGraphJob{
		{ID: "build", Labels: []string{"linux"}, LabelsKnown: true, Instances: 1},
		{ID: "deploy", Needs: []string{"build"}, Labels: []string{"linux"}, LabelsKnown: true, Instances: 1},
	}}
	cases := []struct {
		policy PredictPolicy
		want   time.Duration
	}{
		{PredictPolicy{Quantile: 0.25, Kept: 10}, 3 * s},                // rank ⌈2.5⌉
		{PredictPolicy{Quantile: 0.5, Kept: 10}, 5 * s},                 // rank 5
		{PredictPolicy{Quantile: 0.9, Kept: 10}, 9 * s},                 // rank 9
		{PredictPolicy{Quantile: 1, Kept: 10}, 10 * s},                  // the slowest of the kept
		{PredictPolicy{Quantile: 1, Kept: 11}, 100 * s},                 // the old run counts again
		{PredictPolicy{Quantile: 0.25, MinSamples: 4, Kept: 4}, 7 * s},  // of 7..10, rank 1
		{PredictPolicy{Quantile: 0.25, Kept: 20}, 3 * s},                // all eleven: rank ⌈2.75⌉ of 1..10,100
		{PredictPolicy{}, 3 * s},                                        // defaults: p25 of the last 20
		{PredictPolicy{Quantile: 1.5, Kept: -1}, 3 * s},                 // out of range: defaults
		{PredictPolicy{Quantile: 0.01, Kept: 10}, 1 * s},                // rank never below the first
		{PredictPolicy{Quantile: 0.25, MinSamples: 1, Kept: 1}, 10 * s}, // newest alone
	}
	for _, tc := range cases {
		got := Predict(PredictInput{
			Graph:      graph,
			Observed:   []ObservedJob{{JobID: "build", Queued: runStart, Started: runStart}},
			History:    history,
			PoolLabels: []string{"linux"},
			Now:        runStart,
			Policy:     tc.policy,
		})
		if len(got) != 1 || got[0].Kind != PredictedQueued || !got[0].QueuedAt.Equal(afterStart(tc.want)) {
			t.Errorf("policy %+v: got %s, want deploy queued at %s", tc.policy, describe(got), tc.want)
		}
	}
	// 0.28 × 25 is 7.000000000000001 in floating point: the rank is still 7.
	var ranks []time.Duration
	for i := 1; i <= 25; i++ {
		ranks = append(ranks, time.Duration(i)*s)
	}
	if q, n := durationQuantile(ranks, PredictPolicy{Quantile: 0.28, Kept: 25}); q != 7*s || n != 25 {
		t.Errorf("p28 of 1 s to 25 s: %s of %d run times, want 7s of 25", q, n)
	}
	if !slices.Equal(history[0].Durations, append([]time.Duration{100 * s}, took...)) {
		t.Errorf("Predict reordered the history it was given: %v", history[0].Durations)
	}
}

// TestPredictIsDeterministic: the answer depends on no input order and no map order.
func TestPredictIsDeterministic(t *testing.T) {
	in := PredictInput{
		Graph:      pipelineGraph(),
		Observed:   running(),
		History:    pipelineHistory(),
		PoolLabels: []string{"linux", "large", "deploy"},
		Now:        afterStart(time.Minute),
	}
	want := Predict(in)
	if len(want) != 2 || want[0].JobID != "build" || want[1].JobID != "deploy" {
		t.Fatalf("want build then deploy, got %s", describe(want))
	}
	slices.Reverse(in.Graph.Jobs)
	slices.Reverse(in.Observed)
	slices.Reverse(in.History)
	for i := range 20 {
		if got := Predict(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d with the inputs reversed:\n got %s\nwant %s", i, describe(got), describe(want))
		}
	}
}

// TestPredictSurvivesACycle: a graph the parser would refuse (needs in a cycle) predicts
// nothing rather than recursing forever.
func TestPredictSurvivesACycle(t *testing.T) {
	graph := RunGraph{Jobs: []RunGraphJob{
		{ID: "a", Needs: []string{"b"}, Labels: []string{"linux"}, LabelsKnown: true, Instances: 1},
		{ID: "b", Needs: []string{"a"}, Labels: []string{"linux"}, LabelsKnown: true, Instances: 1},
		{ID: "c", Needs: []string{"ghost"}, Labels: []string{"linux"}, LabelsKnown: true, Instances: 1},
	}}
	got := Predict(PredictInput{Graph: graph, PoolLabels: []string{"linux"}, Now: runStart})
	if len(got) != 3 {
		t.Fatalf("got %s, want three unknown predictions", describe(got))
	}
	for _, p := range got {
		if p.Kind != NotPredicted {
			t.Errorf("%s: %s, want unknown", p.JobID, p.Kind)
		}
	}
	if !strings.Contains(got[0].Why, "cycle") || !strings.Contains(got[2].Why, "ghost is not a job of the file") {
		t.Errorf("reasons do not name the cycle and the missing job: %s", describe(got))
	}
}

func TestRecordJobDuration(t *testing.T) {
	s := time.Second
	history := []JobDurations{{JobID: "lint", Durations: []time.Duration{1 * s, 2 * s, 3 * s}}}
	got := RecordJobDuration(history, "LINT", 4*s, 3)
	if want := []time.Duration{2 * s, 3 * s, 4 * s}; len(got) != 1 || !slices.Equal(got[0].Durations, want) {
		t.Errorf("recording a fourth of three kept: got %+v, want lint %v", got, want)
	}
	if !slices.Equal(history[0].Durations, []time.Duration{1 * s, 2 * s, 3 * s}) {
		t.Errorf("the history given was modified: %v", history[0].Durations)
	}
	got = RecordJobDuration(got, "test", 9*s, 3)
	if len(got) != 2 || got[1].JobID != "test" || !slices.Equal(got[1].Durations, []time.Duration{9 * s}) {
		t.Errorf("a new job's first run time: got %+v", got)
	}
}

// TestPrewarmPredictPolicy holds the policy to the reasons policy.go gives for it.
func TestPrewarmPredictPolicy(t *testing.T) {
	pol := PrewarmPredictPolicy
	if pol.Quantile <= 0 || pol.Quantile >= 0.5 {
		t.Errorf("quantile %v: below the median, or the runners are late in most runs", pol.Quantile)
	}
	if pol.MinSamples > pol.Kept {
		t.Errorf("MinSamples %d > Kept %d: no job could ever be predicted", pol.MinSamples, pol.Kept)
	}
	// With the fewest samples that predict, the fastest run alone never sets the prediction.
	fastestFirst := []time.Duration{time.Second}
	for i := 1; i < pol.MinSamples; i++ {
		fastestFirst = append(fastestFirst, time.Minute)
	}
	if q, _ := durationQuantile(fastestFirst, pol); q != time.Minute {
		t.Errorf("with %d samples, one fast outlier sets the prediction: %s", pol.MinSamples, q)
	}
}

// TestPredictUntoldJobs: the jobs whose events graphJobOf cannot map back to them are found
// by their names alone: an expression, the same name, or a name that is another's matrix
// instance's ("pkg (all)" beside a matrix "pkg"); distinct names are told.
func TestPredictUntoldJobs(t *testing.T) {
	g := RunGraph{Jobs: []RunGraphJob{
		{ID: "lint"},
		{ID: "build", Name: "Build image"},
		{ID: "e2e", Name: "E2E ${{ matrix.os }}", NameUnknown: true},
		{ID: "twin-a", Name: "Twin"},
		{ID: "twin-b", Name: "Twin"},
		{ID: "pkg"},
		{ID: "pkg-all", Name: "pkg (all)"},
		{ID: "deploy", Name: "lint (prod"}, // no closing parenthesis: no instance of lint's
	}}
	untold := untoldJobs(g)
	for _, id := range []string{"e2e", "twin-a", "twin-b", "pkg", "pkg-all"} {
		if untold[id] == "" {
			t.Errorf("%s told, want untold", id)
		}
	}
	for _, id := range []string{"lint", "build", "deploy"} {
		if why := untold[id]; why != "" {
			t.Errorf("%s untold (%s), want told", id, why)
		}
	}
}
