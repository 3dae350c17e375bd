package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// TemporalActivities are the activities whose external system is Temporal itself: a workflow
// in SDK v1.50 cannot send an update to another workflow, so a scale window hands its batch to
// its pool through one of these. Register with worker.RegisterActivity(&TemporalActivities{...});
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
