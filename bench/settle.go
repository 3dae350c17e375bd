package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

const (
	// strandGrace is how long runner workflows may take to end after their pools emptied; a
	// draining runner unregisters and deletes its pod and Secret in a few seconds.
	strandGrace = time.Minute
	// runningOnly narrows a visibility query to running workflows.
	runningOnly = ` AND ExecutionStatus = "Running"`
)

func (b *burstPhase) waitStarted(ctx context.Context) error {
	var err error
	b.allStarted, err = waitJobsStarted(ctx, b.e.world.GitHub, b.jobs)
	return err
}

// waitJobsStarted waits until no job is queued at the double and returns when the last one
// started.
func waitJobsStarted(ctx context.Context, gh *githubdouble.Server, jobs []int64) (time.Time, error) {
	queued := len(jobs)
	var last time.Time
	err := poll(ctx, fmt.Sprintf("%d jobs to start", len(jobs)), func() (bool, error) {
		last, queued = time.Time{}, 0
		for _, id := range jobs {
			j, _ := gh.Job(id)
			if j.Status == githubdouble.StatusQueued {
				queued++
			} else if j.StartedAt.After(last) {
				last = j.StartedAt
			}
		}
		return queued == 0, nil
	})
	if err != nil {
		return last, fmt.Errorf("%d of %d jobs started: %w", len(jobs)-queued, len(jobs), err)
	}
	return last, nil
}

// abandon terminates the runner workflows of a burst that failed, so they do not load the
// phases after it.
func (b *burstPhase) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runs, err := listRuns(ctx, b.e.c, b.runnerQuery()+runningOnly)
	if err != nil {
		b.e.log.Warn("list the runner workflows of a failed burst", "error", err)
		return
	}
	for _, r := range runs {
		_ = b.e.c.TerminateWorkflow(ctx, r.id, r.runID, "benchmark: burst failed")
	}
}

// waitSettled waits until every job completed, the pools hold no runner and no reservation,
// and no scale window is open.
func (b *burstPhase) waitSettled(ctx context.Context) error {
	// Once a second: pool status is a query the worker answers, which should not load it.
	return pollEvery(ctx, time.Second, "the burst's runners to finish", func() (bool, error) {
		for _, id := range b.jobs {
			if j, _ := b.e.world.GitHub.Job(id); j.Status != githubdouble.StatusCompleted {
				return false, nil
			}
		}
		for _, p := range b.pools {
			st, err := b.e.status(ctx, p)
			if err != nil {
				return false, err
			}
			if len(st.Runners) > 0 || st.Reservations > 0 {
				return false, nil
			}
		}
		windows, err := b.e.c.CountWorkflow(ctx, countRequest(b.windowQuery()+runningOnly))
		return err == nil && windows.GetCount() == 0, err
	})
}

// endStranded waits up to strandGrace for the runner workflows of the pools to end, then
// terminates those still running and returns their ids. A runner workflow still running once
// its pool has forgotten it is stranded: nothing will drain it (it waits for its own timeouts),
// so the benchmark ends it to keep the next phase clean and reports it.
func (b *burstPhase) endStranded(ctx context.Context) ([]string, error) {
	query := b.runnerQuery() + runningOnly
	wait, cancel := context.WithTimeout(ctx, strandGrace)
	defer cancel()
	err := pollEvery(wait, time.Second, "runner workflows to end", func() (bool, error) {
		n, err := b.e.c.CountWorkflow(wait, countRequest(query))
		return err == nil && n.GetCount() == 0, err
	})
	if err == nil || ctx.Err() != nil {
		return nil, ctx.Err()
	}
	runs, err := listRuns(ctx, b.e.c, query)
	if err != nil {
		return nil, err
	}
	b.explainStranded(ctx, runs)
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.id)
		if err := b.e.c.TerminateWorkflow(ctx, r.id, r.runID, "benchmark: stranded, its pool no longer tracks it"); err != nil {
			return ids, fmt.Errorf("terminate stranded %s: %w", r.id, err)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// explainStranded says, for each stranded runner, what its pool last recorded about it (the
// pool keeps the last PoolFinishedKept ends), so the report can name the cause.
func (b *burstPhase) explainStranded(ctx context.Context, runs []executionRef) {
	reasons := map[string]string{}
	for _, p := range b.pools {
		st, err := b.e.status(ctx, p)
		if err != nil {
			continue
		}
		for _, f := range st.Finished {
			reasons[f.Name] = fmt.Sprintf("%s at %s: %s", f.State, f.At.Format("15:04:05.000"), f.Reason)
		}
	}
	for _, r := range runs {
		why := cmp.Or(reasons[runnerName(r.id)], "not among the pool's recent ends")
		b.e.say("stranded runner workflow %s (started %s); its pool recorded it %s", r.id, r.started.Format("15:04:05.000"), why)
	}
}
