package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The prewarming pool's part of the demo: a pipeline whose build needs lint and test. Runs of
// it teach org-pipelines how long lint and test take (it predicts nothing until it has
// PrewarmMinSamples run times of a job); in the run shown after them, the pool starts build's
// runner before GitHub queues build.
const (
	pipelinePool = "org-pipelines"
	pipelineRepo = demoOrg + "/app"
	pipelinePath = ".github/workflows/ci.yml"
	pipelineFile = `name: CI
on: push
jobs:
  lint:
    runs-on: [self-hosted, pipelines]
    steps: [{run: make lint}]
  test:
    runs-on: [self-hosted, pipelines]
    steps: [{run: make test}]
  build:
    needs: [lint, test]
    runs-on: [self-hosted, pipelines]
    steps: [{run: make build}]
`
)

// PrewarmResult is the run shown after the pool learned the pipeline.
type PrewarmResult struct {
	// WarmedAhead: the pool started build's runner before build was queued.
	WarmedAhead bool
	// Lead is how long before build was queued its runner's start was decided.
	Lead time.Duration
	// Why is the pool's reason for that start.
	Why string
	// BuildWait is build's wait from queued to started; FirstWait the longest of lint's and
	// test's, whose runners started when they were queued.
	BuildWait, FirstWait time.Duration
}

// pushPipeline commits the pipeline's workflow file.
func (s *System) pushPipeline() error {
	_, err := s.World.GitHub.PushFiles(githubdouble.PushSpec{Repository: pipelineRepo, Files: map[string]string{pipelinePath: pipelineFile}})
	return err
}

// startPipelines starts n runs of the pipeline at once.
func (s *System) startPipelines(n int) ([]int64, error) {
	var ids []int64
	for range n {
		run, err := s.World.GitHub.StartRun(githubdouble.RunSpec{Repository: pipelineRepo, Path: pipelinePath})
		if err != nil {
			return ids, err
		}
		ids = append(ids, run.ID)
	}
	return ids, nil
}

// showPrewarm runs the pipeline learningRuns times at once for the pool to learn it, then
// once more, and reports how that run's build found its runner. It runs after the burst, so
// the burst's figures are the burst's alone.
func (s *System) showPrewarm(ctx context.Context, timeout time.Duration, out io.Writer) (PrewarmResult, error) {
	fmt.Fprintf(out, "\nRunning the pipeline (lint and test, then build) %d times for %s to learn it...\n", learningRuns, pipelinePool)
	learning, err := s.startPipelines(learningRuns)
	if err != nil {
		return PrewarmResult{}, err
	}
	if err := s.waitRuns(ctx, learning, timeout); err != nil {
		return PrewarmResult{}, err
	}
	shown, err := s.startPipelines(1)
	if err != nil {
		return PrewarmResult{}, err
	}
	if err := s.waitRuns(ctx, shown, timeout); err != nil {
		return PrewarmResult{}, err
	}
	run, _ := s.World.GitHub.Run(shown[0])
	build := run.ByJob["build"][0]
	res := PrewarmResult{BuildWait: build.StartedAt.Sub(build.CreatedAt)}
	for _, id := range []string{"lint", "test"} {
		j := run.ByJob[id][0]
		res.FirstWait = max(res.FirstWait, j.StartedAt.Sub(j.CreatedAt))
	}
	st, err := poolcli.Status(ctx, s.Temporal, pipelinePool)
	if err != nil {
		return res, err
	}
	for _, d := range st.Decisions {
		if slices.Contains(d.Started, build.RunnerName) {
			res.WarmedAhead, res.Lead, res.Why = d.At.Before(build.CreatedAt), build.CreatedAt.Sub(d.At), d.Why
		}
	}
	printPrewarm(out, len(learning), res)
	return res, nil
}

func printPrewarm(out io.Writer, learned int, res PrewarmResult) {
	fmt.Fprintf(out, "Prewarming (%s): %d runs of CI taught the pool how long lint and test take. In the next run,\n", pipelinePool, learned)
	if res.WarmedAhead {
		fmt.Fprintf(out, "  the pool started build's runner %.1fs before GitHub queued build (%s);\n", res.Lead.Seconds(), res.Why)
	} else {
		fmt.Fprintf(out, "  build's runner was started only once build was queued (%s);\n", res.Why)
	}
	fmt.Fprintf(out, "  build waited %.1fs for its runner, lint and test up to %.1fs for runners started when they were queued.\n",
		res.BuildWait.Seconds(), res.FirstWait.Seconds())
}

// waitRuns waits until every run is over.
func (s *System) waitRuns(ctx context.Context, ids []int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !s.World.GitHub.RunsDone(ids...) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pipeline runs %v not done after %s", ids, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// learningRuns is how many runs the pool needs before it predicts.
const learningRuns = workflows.PrewarmMinSamples
