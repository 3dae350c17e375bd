package activities

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/internal/groupcommit"
	"github.com/runnerflow/runnerflow/workflows"
)

// RunnerReports hands the runner workflows' state reports to their pools: the reports of all the
// runners this worker runs for one pool share signals (a group commit, paced at
// workflows.RunnerReportPace), so a burst's reports reach a pool as about one signal a second
// rather than one per report. One per worker process: register the same value on every worker
// that runs runner workflows (the runners call it as a local activity).
type RunnerReports struct {
	queue *groupcommit.Queue[workflows.RunnerStateReport]
}

// NewRunnerReports signals the pools through c.
func NewRunnerReports(c client.Client) *RunnerReports {
	return &RunnerReports{queue: groupcommit.New(signalPoolReports(c), groupcommit.Options{
		MaxBatch: workflows.RunnerReportBatchMax, Hold: workflows.RunnerReportHold, Pace: workflows.RunnerReportPace,
	})}
}

// ReportRunnerState returns once the signal carrying the report reached the pool's history (or
// the pool no longer exists: a runner whose pool is gone reports to no one). A report delivered
// twice (an attempt whose answer was lost, then retried) is the same state told twice, which
// the pool takes as once.
func (r *RunnerReports) ReportRunnerState(ctx context.Context, in workflows.ReportRunnerStateInput) error {
	if in.Pool == "" {
		return temporal.NewNonRetryableApplicationError("a runner report needs its pool", workflows.ErrInvalidSpec, nil)
	}
	return r.queue.Commit(ctx, in.Pool, in.Report)
}

// signalPoolReports signals one batch of reports to a pool.
func signalPoolReports(c client.Client) groupcommit.Sender[workflows.RunnerStateReport] {
	return func(ctx context.Context, pool string, reports []workflows.RunnerStateReport) error {
		err := c.SignalWorkflow(ctx, workflows.PoolWorkflowID(pool), "", workflows.SignalRunnerStates,
			workflows.RunnerStateBatch{Reports: reports})
		if _, gone := errors.AsType[*serviceerror.NotFound](err); gone {
			return nil
		}
		return err
	}
}
