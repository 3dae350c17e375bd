package pools

import (
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// prewarmPipeline is issue 39's run without its matrix: lint and test, then build.
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
`
)

// A prewarming pool, taught the jobs' run times (20 s) by five earlier runs of the workflow,
// has build's runner started before build is queued: build starts on it at once, where the
// run's first jobs waited for theirs. Each job still has one runner, and each run's graph is
// read once (two calls: the run for its file's path, then the file). A run whose test fails
// lets the runner warmed for build go within the grace.
func TestPrewarmStartsBuildsRunnerBeforeBuildIsQueued(t *testing.T) {
	p := newPoolTest(t, "prewarm")
	p.webhooks()
	spec := p.spec(0, 10, "20s")
	spec.Prewarm = &workflows.PrewarmSpec{Enabled: true}
	p.apply(spec)
	repo := p.org + "/app"
	if _, err := world.GitHub.PushFiles(githubdouble.PushSpec{Repository: repo, Files: map[string]string{prewarmPipelinePath: prewarmPipeline}}); err != nil {
		t.Fatal(err)
	}
	start := func(conclusions map[string]string) int64 {
		run, err := world.GitHub.StartRun(githubdouble.RunSpec{Repository: repo, Path: prewarmPipelinePath, Conclusions: conclusions})
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	done := func(ids ...int64) func() bool {
		return func() bool {
			for _, id := range ids {
				run, ok := world.GitHub.Run(id)
				if !ok || len(run.Waiting) > 0 {
					return false
				}
				for _, j := range run.Jobs {
					if j.Status != githubdouble.StatusCompleted {
						return false
					}
				}
			}
			return true
		}
	}
	var earlier []int64
	for range 5 {
		earlier = append(earlier, start(nil))
	}
	waitFor(t, 3*wait, "the five earlier runs completed", done(earlier...))
	calls := len(world.GitHub.CallLog())

	id := start(nil)
	waitFor(t, wait, "the run completed", done(id))
	run, _ := world.GitHub.Run(id)
	lint, build := run.ByJob["lint"][0], run.ByJob["build"][0]
	coldWait, buildWait := lint.StartedAt.Sub(lint.CreatedAt), build.StartedAt.Sub(build.CreatedAt)
	t.Logf("lint waited %s for a runner started when it was queued, build %s", coldWait, buildWait)
	if buildWait > 3*time.Second || buildWait*2 > coldWait {
		t.Errorf("build waited %s for its runner, lint %s: want build's runner ready when build is queued", buildWait, coldWait)
	}
	st := p.eventually(wait, "every runner gone", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 })
	if st.Totals.Started != 18 {
		t.Errorf("%d runners started for 6 runs of 3 jobs, want 18: one a job", st.Totals.Started)
		for _, d := range st.Decisions {
			t.Logf("decision at %s: desired %d, started %v, drained %v: %s", d.At.Format("15:04:05.000"), d.Desired, d.Started, d.Drained, d.Why)
		}
		for _, f := range st.Finished {
			t.Logf("finished %s %s at %s: %s", f.Name, f.State, f.At.Format("15:04:05.000"), f.Reason)
		}
	}
	graphCalls := 0
	for _, c := range world.GitHub.CallLog()[calls:] {
		if c.Route == runRoute || c.Route == contentsRoute {
			graphCalls++
		}
	}
	if graphCalls != 2 {
		t.Errorf("%d reads of the run and its file, want 2: the run's graph read once", graphCalls)
	}

	// A run whose test fails: build will be skipped, so the runner warmed for it (when test
	// ran long enough for its start to come) goes at once, though a scale-down delay of ten
	// minutes holds any other idle runner.
	spec.ScaleDownDelay.Duration = 10 * time.Minute
	p.apply(spec)
	before := st.Totals.Started
	failing := start(map[string]string{"test": githubdouble.ConclusionFailure})
	waitFor(t, wait, "the failing run completed, build skipped", done(failing))
	deadline := time.Now().Add(time.Minute)
	for st = p.status(); len(st.Runners) > 0 || st.Predicted > 0; st = p.status() {
		if time.Now().After(deadline) {
			for _, d := range st.Decisions {
				t.Logf("decision at %s: desired %d, started %v, drained %v: %s", d.At.Format("15:04:05.000"), d.Desired, d.Started, d.Drained, d.Why)
			}
			run, _ := world.GitHub.Run(failing)
			for _, j := range run.Jobs {
				t.Logf("job %s %s/%s created %s started %s completed %s", j.Name, j.Status, j.Conclusion,
					j.CreatedAt.Format("15:04:05.000"), j.StartedAt.Format("15:04:05.000"), j.CompletedAt.Format("15:04:05.000"))
			}
			t.Fatalf("runners %v, predicted %d (%s): want none left a minute after the run", runnerStates(st), st.Predicted, st.PredictedWhy)
		}
		time.Sleep(time.Second)
	}
	t.Logf("runners started for the failing run: %d (lint, test and, when warmed in time, build's)", st.Totals.Started-before)
	if skipped, _ := world.GitHub.Run(failing); skipped.ByJob["build"][0].Conclusion != githubdouble.ConclusionSkipped {
		t.Errorf("build of the failing run concluded %q, want skipped", skipped.ByJob["build"][0].Conclusion)
	}
	if testworld.RecordingHistories() {
		// A prewarming pool's history takes the prewarm gate's new branch: graph reads,
		// runners warmed ahead, a release (changePrewarm).
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-prewarm")
	}
}

// The routes a run's graph is read with (activities.ReadRunGraph without the file's path).
const (
	runRoute      = "GET /repos/{owner}/{repo}/actions/runs/{run_id}"
	contentsRoute = "GET /repos/{owner}/{repo}/contents/{path...}"
)
