package pools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// prewarmPipeline is issue 39's run: lint and test, then build, then a deploy over a 4-way
// matrix. prewarmBroken is a second workflow of the repository the pool cannot read.
const (
	prewarmPipelinePath = ".github/workflows/ci.yml"
	prewarmPipeline     = `name: CI
on: push
jobs:
  lint:
    runs-on: [self-hosted, linux]
    steps: [{run: make lint}]
  test:
    runs-on: [self-hosted, linux]
    steps: [{run: make test}]
  build:
    needs: [lint, test]
    runs-on: [self-hosted, linux]
    steps: [{run: make build}]
  deploy:
    needs: build
    runs-on: [self-hosted, linux]
    strategy: {matrix: {region: [a, b, c, d]}}
    steps: [{run: make deploy}]
`
	prewarmBrokenPath = ".github/workflows/nightly.yml"
	prewarmBroken     = "name: Nightly\non: push\njobs: [this is not, a workflow\n"
)

// A prewarming pool, taught the jobs' run times (15 s) by five earlier runs of the workflow,
// has build's runner and deploy's four started before they are queued: each starts on its
// runner at once, where the run's first jobs waited for theirs. Each job still has one
// runner; the sixth run's graph is read in one call, at the path the earlier runs' reads
// found the file at. A run of a workflow whose file does not parse, beside it, runs as
// without prewarming: its reason recorded, nothing predicted for it. A run whose test fails
// lets the runners warmed for build and deploy go within the grace. `starter why` says build
// started on a runner warmed before it was queued, from its run's graph; the worker's
// counters say build's and deploy's five runners were predicted and taken, and every runner
// predicted was taken or wasted.
func TestPrewarmStartsBuildsRunnerBeforeBuildIsQueued(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newPoolTestWith(t, "prewarm", func(cfg *workerapp.Config) { cfg.Metrics = reg })
	p.webhooks()
	spec := p.spec(0, 24, "15s")
	spec.Prewarm = &workflows.PrewarmSpec{Enabled: true}
	p.apply(spec)
	repo := p.org + "/app"
	sha, err := world.GitHub.PushFiles(githubdouble.PushSpec{Repository: repo, Files: map[string]string{
		prewarmPipelinePath: prewarmPipeline, prewarmBrokenPath: prewarmBroken,
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := func(conclusions map[string]string) int64 {
		run, err := world.GitHub.StartRun(githubdouble.RunSpec{Repository: repo, Path: prewarmPipelinePath, Conclusions: conclusions})
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	var earlier []int64
	for range 5 {
		earlier = append(earlier, start(nil))
	}
	waitFor(t, 3*wait, "the five earlier runs completed", runsDone(earlier...))
	calls := len(world.GitHub.CallLog())

	id := start(nil)
	// GitHub runs the broken workflow's jobs (its parser is not the pool's): two jobs of one
	// run, queued at once.
	broken, err := world.GitHub.QueueMatrix(githubdouble.JobSpec{
		Repository: repo, Labels: []string{"self-hosted", "linux"}, Workflow: "Nightly", Name: "nightly",
		HeadSHA: sha, WorkflowPath: prewarmBrokenPath,
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	brokenRun := fmt.Sprintf("run %d (", broken[0].RunID)
	warmedWhy := fmt.Sprintf("started on a runner warmed * before it was queued (predicted from run %d's graph)", id)
	var buildWhy poolcli.WhyReport
	for !runsDone(id)() || !jobsDone(broken) {
		st := p.status()
		if strings.Contains(st.PredictedWhy, brokenRun) || st.Mode != workflows.PoolActive {
			t.Errorf("pool %s (%s), predicted %d: %s; want active, nothing predicted for the broken run", st.Mode, st.ModeReason, st.Predicted, st.PredictedWhy)
		}
		// Asked once the pool has build on a runner (why's reads are a few queries, but the
		// worker shares this machine's CPU with the double and Temporal).
		if run, _ := world.GitHub.Run(id); len(run.ByJob["build"]) == 1 && !wildcardIn(buildWhy.Detail, warmedWhy) &&
			slices.ContainsFunc(st.Runners, func(r workflows.PoolRunner) bool { return r.JobID == run.ByJob["build"][0].ID }) {
			buildWhy = p.whyJSON(run.ByJob["build"][0].ID)
		}
		time.Sleep(time.Second)
	}
	t.Logf("why build: %s", buildWhy.Detail)
	if buildWhy.Waiting || !wildcardIn(buildWhy.Detail, warmedWhy) || buildWhy.Facts.Prewarmed == nil || buildWhy.Facts.Prewarmed.Job != "build" {
		t.Errorf("why build, while it ran: %+v; want it running, %q", buildWhy.Verdict, warmedWhy)
	}
	run, _ := world.GitHub.Run(id)
	lint := run.ByJob["lint"][0]
	coldWait := lint.StartedAt.Sub(lint.CreatedAt)
	t.Logf("lint waited %s for a runner started when it was queued", coldWait)
	for _, j := range append(run.ByJob["build"], run.ByJob["deploy"]...) {
		waited := j.StartedAt.Sub(j.CreatedAt)
		t.Logf("%s waited %s", j.Name, waited)
		if waited > 3*time.Second || waited*2 > coldWait {
			t.Errorf("%s waited %s for its runner, lint %s: want its runner ready when it is queued", j.Name, waited, coldWait)
		}
	}
	for _, j := range broken {
		j, _ = world.GitHub.Job(j.ID)
		t.Logf("%s of the broken workflow waited %s", j.Name, j.StartedAt.Sub(j.CreatedAt))
		if j.Conclusion != githubdouble.ConclusionSuccess {
			t.Errorf("%s of the broken workflow concluded %q, want success", j.Name, j.Conclusion)
		}
	}
	st := p.eventually(wait, "every runner gone", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 })
	if want := int64(6*7 + 2); st.Totals.Started != want {
		t.Errorf("%d runners started for 6 runs of 7 jobs and the broken run's 2, want %d: one a job", st.Totals.Started, want)
		logDecisions(t, st)
	}
	graphCalls := 0
	for _, c := range world.GitHub.CallLog()[calls:] {
		if c.Route == runRoute || c.Route == contentsRoute {
			graphCalls++
		}
	}
	reads := graphReads(t, p)
	six, nightly := reads[id], reads[broken[0].RunID]
	if six.Calls != 1 || six.Path != prewarmPipelinePath || six.Graph == nil {
		t.Errorf("sixth run's graph read %+v, want one call at %s: the path the earlier reads found", six, prewarmPipelinePath)
	}
	if nightly.Graph != nil || nightly.NoGraph != workflows.RunGraphInvalid || nightly.Calls != 2 || nightly.Path != prewarmBrokenPath {
		t.Errorf("broken run's graph read %+v, want no graph (%s) after reading the run and the file", nightly, workflows.RunGraphInvalid)
	}
	if graphCalls != six.Calls+nightly.Calls {
		t.Errorf("the double answered %d reads of runs and files, the reads say %d and %d", graphCalls, six.Calls, nightly.Calls)
	}

	// A run whose test fails: build and deploy will be skipped, so the runners warmed for them
	// (when test ran long enough for their start to come) go at once, though a scale-down
	// delay of ten minutes holds any other idle runner.
	spec.ScaleDownDelay.Duration = 10 * time.Minute
	p.apply(spec)
	before := st.Totals.Started
	failing := start(map[string]string{"test": githubdouble.ConclusionFailure})
	waitFor(t, wait, "the failing run completed, build skipped", runsDone(failing))
	deadline := time.Now().Add(time.Minute)
	for st = p.status(); len(st.Runners) > 0 || st.Predicted > 0; st = p.status() {
		if time.Now().After(deadline) {
			logDecisions(t, st)
			run, _ := world.GitHub.Run(failing)
			for _, j := range run.Jobs {
				t.Logf("job %s %s/%s created %s started %s completed %s", j.Name, j.Status, j.Conclusion,
					j.CreatedAt.Format("15:04:05.000"), j.StartedAt.Format("15:04:05.000"), j.CompletedAt.Format("15:04:05.000"))
			}
			t.Fatalf("runners %v, predicted %d (%s): want none left a minute after the run", runnerStates(st), st.Predicted, st.PredictedWhy)
		}
		time.Sleep(time.Second)
	}
	t.Logf("runners started for the failing run: %d (lint, test and, when warmed in time, build's and deploy's)", st.Totals.Started-before)
	skipped, _ := world.GitHub.Run(failing)
	for _, j := range append(skipped.ByJob["build"], skipped.ByJob["deploy"]...) {
		if j.Conclusion != githubdouble.ConclusionSkipped {
			t.Errorf("%s of the failing run concluded %q, want skipped", j.Name, j.Conclusion)
		}
	}
	// Every prediction has ended: the sixth run's five runners taken, the failing run's (if
	// warmed in time) wasted.
	var counts map[string]float64
	waitFor(t, wait, "every runner predicted counted taken or wasted", func() bool {
		counts = prewarmCounters(t, reg, p.name)
		return counts["predicted"] == counts["taken"]+counts["wasted"]
	})
	t.Logf("prewarm counters: %v", counts)
	if counts["predicted"] < 5 || counts["taken"] < 5 || (counts["wasted"] > 0) != (counts["wasted_seconds"] > 0) {
		t.Errorf("prewarm counters %v: want build's and deploy's five runners predicted and taken, runner time for any wasted", counts)
	}
	if testworld.RecordingHistories() {
		// A prewarming pool's history takes the prewarm gate's new branch: graph reads,
		// runners warmed ahead, a release (changePrewarm).
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-prewarm")
	}
}

// prewarmCounters sums the pool's prewarm counters (every reason, every label set the SDK
// adds) by what they count: predicted, taken, wasted and wasted_seconds.
func prewarmCounters(t *testing.T, reg *prometheus.Registry, pool string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		workflows.MetricPrewarmPredicted + "_total": "predicted", workflows.MetricPrewarmTaken + "_total": "taken",
		workflows.MetricPrewarmWasted + "_total": "wasted", workflows.MetricPrewarmWastedSeconds + "_total": "wasted_seconds",
	}
	out := map[string]float64{}
	for _, f := range families {
		key, ok := names[f.GetName()]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && l.GetValue() == pool {
					out[key] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// wildcardIn reports whether s holds pattern, whose one * stands for any text.
func wildcardIn(s, pattern string) bool {
	before, after, _ := strings.Cut(pattern, "*")
	i := strings.Index(s, before)
	return i >= 0 && strings.Contains(s[i+len(before):], after)
}

// runsDone reports whether the runs started with StartRun are over (githubdouble's RunsDone).
func runsDone(ids ...int64) func() bool {
	return func() bool { return world.GitHub.RunsDone(ids...) }
}

// jobsDone reports whether the jobs have completed.
func jobsDone(jobs []githubdouble.Job) bool {
	for _, j := range jobs {
		if j, ok := world.GitHub.Job(j.ID); !ok || j.Status != githubdouble.StatusCompleted {
			return false
		}
	}
	return true
}

// graphReads are the pool's ReadRunGraph results by run, as its histories recorded them
// (every run of the pool workflow, back through continue-as-new).
func graphReads(t *testing.T, p *poolTest) map[int64]workflows.ReadRunGraphResult {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	out := map[int64]workflows.ReadRunGraphResult{}
	for runID, n := "", 0; n == 0 || (runID != "" && n < 50); n++ {
		inputs := map[int64]workflows.ReadRunGraphInput{}
		it := p.c.GetWorkflowHistory(context.Background(), workflows.PoolWorkflowID(p.name), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		runID = ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				runID = a.GetContinuedExecutionRunId()
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == workflows.ActivityReadRunGraph {
				var in workflows.ReadRunGraphInput
				if err := dc.FromPayloads(a.GetInput(), &in); err != nil {
					t.Fatal(err)
				}
				inputs[ev.GetEventId()] = in
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				if in, ok := inputs[a.GetScheduledEventId()]; ok {
					var res workflows.ReadRunGraphResult
					if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
						t.Fatal(err)
					}
					out[in.RunID] = res
				}
			}
		}
	}
	return out
}

func logDecisions(t *testing.T, st workflows.PoolStatus) {
	t.Helper()
	for _, d := range st.Decisions {
		t.Logf("decision at %s: desired %d, started %v, drained %v: %s", d.At.Format("15:04:05.000"), d.Desired, d.Started, d.Drained, d.Why)
	}
	for _, f := range st.Finished {
		t.Logf("finished %s %s at %s: %s", f.Name, f.State, f.At.Format("15:04:05.000"), f.Reason)
	}
}

// The routes a run's graph is read with (activities.ReadRunGraph without the file's path).
const (
	runRoute      = "GET /repos/{owner}/{repo}/actions/runs/{run_id}"
	contentsRoute = "GET /repos/{owner}/{repo}/contents/{path...}"
)
