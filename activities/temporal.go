package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// TemporalActivities are the activities whose external system is Temporal itself: a workflow
// in SDK v1.50 cannot send an update to another workflow, so a scale window hands its batch to
// its pool through one of these; and a pool starts a plan's runner workflows with one call
// rather than a child workflow each. Register with worker.RegisterActivity(&TemporalActivities{...});
// the method names are the activity names the workflows use.
type TemporalActivities struct {
	// Client reaches the namespace the pools run in.
	Client client.Client
}

// UpdatePoolReservations applies one scale window's batch to its pool with the pool's
// UpdateReservations update and returns the pool's answer. It is idempotent: the update id is
// the window's run, so the server deduplicates a retried call, and the batch itself is keyed by
// job. A pool that does not exist, or that rejects the batch, fails it for good; anything else
// (Temporal unavailable, the pool busy) is retried under ReservationUpdatePolicy.
func (a *TemporalActivities) UpdatePoolReservations(ctx context.Context, in workflows.UpdatePoolReservationsInput) (workflows.ReservationBatchResult, error) {
	var out workflows.ReservationBatchResult
	if in.Pool == "" || in.UpdateID == "" {
		return out, temporal.NewNonRetryableApplicationError("pool and update id are required", workflows.ErrInvalidSpec, nil)
	}
	handle, err := a.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     in.UpdateID,
		WorkflowID:   workflows.PoolWorkflowID(in.Pool),
		UpdateName:   workflows.UpdateReservations,
		Args:         []any{in.Batch},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, &out)
	}
	return out, classifyUpdateError(in.Pool, err)
}

// classifyUpdateError sorts an update's failure into runnerflow's error types. The pool's own
// answer (its validator or handler refusing the batch) arrives as an application error: the
// same batch will be refused again. A missing pool is NotFound. The rest is left as is, which
// the retry policy treats as transient.
func classifyUpdateError(pool string, err error) error {
	if err == nil {
		return nil
	}
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("pool %s has no running workflow", pool), workflows.ErrNotFound, err)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("pool %s refused the reservation batch: %s", pool, app.Message()), workflows.ErrInvalidSpec, err)
	}
	return err
}

// StartRunnerWorkflows starts one plan's runner workflows, RunnerStartConcurrency at a time,
// each with RunnerState=pending and RunnerPool set. A runner whose workflow already exists
// (started by an earlier attempt of this batch, maybe ended since) counts as started. A refusal
// no retry can change fails that runner alone, in the result; anything else (Temporal
// unreachable, overloaded) fails the call, and the retry starts what is still missing.
func (a *TemporalActivities) StartRunnerWorkflows(ctx context.Context, in workflows.StartRunnerWorkflowsInput) (workflows.StartRunnerWorkflowsOutput, error) {
	var out workflows.StartRunnerWorkflowsOutput
	errs := eachConcurrently(in.Runners, func(r workflows.RunnerInput) error { return a.startRunner(ctx, r) })
	for i, err := range errs {
		switch {
		case err == nil:
		case refusedForGood(err):
			out.Failed = append(out.Failed, workflows.RunnerStartFailure{Name: in.Runners[i].Name, Reason: err.Error()})
		default:
			return workflows.StartRunnerWorkflowsOutput{}, fmt.Errorf("start runner workflow %s: %w", in.Runners[i].Name, err)
		}
	}
	return out, nil
}

// eachConcurrently calls do for every item, workflows.RunnerStartConcurrency at a time, and
// returns each call's error at its item's index.
func eachConcurrently[T any](items []T, do func(T) error) []error {
	errs := make([]error, len(items))
	slots := make(chan struct{}, workflows.RunnerStartConcurrency)
	var wg sync.WaitGroup
	for i, item := range items {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = do(item)
		})
	}
	wg.Wait()
	return errs
}

func (a *TemporalActivities) startRunner(ctx context.Context, in workflows.RunnerInput) error {
	_, err := a.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    workflows.RunnerWorkflowID(in.Pool, in.Name),
		TaskQueue:             workflows.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// The runner's first workflow task comes back in the start's answer and runs on this
		// worker at once, with no trip through matching (the server's eager workflow start): a
		// burst's runners reach their pod's create sooner and the server dispatches less.
		// Without a free workflow-task slot here the SDK starts it the usual way.
		EnableEagerStart: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchAttrRunnerState.ValueSet(string(workflows.RunnerPending)), workflows.SearchAttrPool.ValueSet(in.Pool)),
	}, workflows.RunnerWorkflowType, in)
	var exists *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &exists) {
		return nil
	}
	return err
}

// SignalRunnerStatuses tells each runner of the batch its listing status, RunnerStartConcurrency
// at a time. A runner whose workflow is not found has ended: it is named in the result. Any
// other failure fails the call, and the retry tells the whole batch again (a status told twice
// is the same status).
func (a *TemporalActivities) SignalRunnerStatuses(ctx context.Context, in workflows.SignalRunnerStatusesInput) (workflows.SignalRunnerStatusesOutput, error) {
	var out workflows.SignalRunnerStatusesOutput
	errs := eachConcurrently(in.Updates, func(u workflows.RunnerStatusUpdate) error {
		return a.Client.SignalWorkflow(ctx, workflows.RunnerWorkflowID(in.Pool, u.Runner), "", workflows.SignalRunnerStatus, u.Status)
	})
	for i, err := range errs {
		_, gone := errors.AsType[*serviceerror.NotFound](err)
		switch {
		case err == nil:
		case gone:
			out.Gone = append(out.Gone, in.Updates[i].Runner)
		default:
			return workflows.SignalRunnerStatusesOutput{}, fmt.Errorf("signal runner %s: %w", in.Updates[i].Runner, err)
		}
	}
	return out, nil
}

// refusedForGood: Temporal's answers that the same start will get again.
func refusedForGood(err error) bool {
	var (
		invalid  *serviceerror.InvalidArgument
		denied   *serviceerror.PermissionDenied
		noSpace  *serviceerror.NamespaceNotFound
		notFound *serviceerror.NotFound
	)
	return errors.As(err, &invalid) || errors.As(err, &denied) || errors.As(err, &noSpace) || errors.As(err, &notFound)
}

// ListEndedRunners lists the pool's runner workflows that were terminated or timed out since
// in.Since, from visibility (every page), by runner name.
func (a *TemporalActivities) ListEndedRunners(ctx context.Context, in workflows.ListEndedRunnersInput) (workflows.ListEndedRunnersOutput, error) {
	var out workflows.ListEndedRunnersOutput
	if in.Pool == "" || strings.ContainsAny(in.Pool, `'"\`) {
		return out, temporal.NewNonRetryableApplicationError("a pool name is required", workflows.ErrInvalidSpec, nil)
	}
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s' AND %s = '%s' AND ExecutionStatus IN ('Terminated', 'TimedOut') AND CloseTime >= '%s'",
			workflows.RunnerWorkflowType, workflows.SearchAttrPool.GetName(), in.Pool, in.Since.UTC().Format(time.RFC3339)),
		PageSize: 1000,
	}
	for {
		resp, err := a.Client.ListWorkflow(ctx, req)
		if err != nil {
			return workflows.ListEndedRunnersOutput{}, fmt.Errorf("list ended runner workflows of pool %s: %w", in.Pool, err)
		}
		for _, e := range resp.GetExecutions() {
			name := e.GetExecution().GetWorkflowId()
			name = name[strings.LastIndex(name, "/")+1:]
			status := strings.TrimPrefix(e.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")
			out.Ended = append(out.Ended, workflows.EndedRunner{
				Name: name, Status: statusName(status), ClosedAt: e.GetCloseTime().AsTime(),
			})
		}
		if len(resp.GetNextPageToken()) == 0 {
			return out, nil
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}

// statusName turns TERMINATED / TIMED_OUT into the names the query language uses.
func statusName(s string) string {
	switch s {
	case "TERMINATED":
		return "Terminated"
	case "TIMED_OUT":
		return "TimedOut"
	}
	return s
}
