package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// Force-remove: the operator removes a runner now, even mid-job (UpdateForceRemove, or
// SignalForceRemove forwarded by the pool's UpdateForceRemoveRunner).

// forceRemove ends a runner at the operator's word, even mid-job. GitHub refuses to remove a
// busy runner (422), so the order is the reverse of cleanup's: the pod first (its runner
// process dies, GitHub sees the runner go and fails its job), then the registration (the 422
// retried while GitHub still says busy, for ForceRemoveBusyGrace), then the Secret. The
// runner reports draining with Removing at once, so its pool holds its place (no replacement,
// its slot taken) until it reports its end.
func (r *runner) forceRemove(ctx workflow.Context, end ending) (RunnerResult, error) {
	r.log.Info("Runner force-removed", "reason", end.reason, "busy", r.obs.Busy, "jobID", r.obs.JobID)
	r.obs.setBusy(false)
	if r.state == RunnerDraining {
		// Already draining (e.g. drained mid-job): tell the pool it is now being removed.
		r.reason = end.reason
		r.report(ctx, RunnerDraining, end.reason)
	} else {
		r.setState(ctx, RunnerDraining, end.reason)
		if r.lean {
			r.report(ctx, RunnerDraining, end.reason) // the pool holds its place while it is removed
		}
	}
	if err := r.forceCleanup(ctx); err != nil {
		return r.fail(ctx, err)
	}
	r.setState(ctx, RunnerDone, end.reason)
	r.drainSignals()
	return r.result(), nil
}

// forceCleanup removes the pod, then the registration, then the Secret (see forceRemove).
func (r *runner) forceCleanup(ctx workflow.Context) error {
	r.cleaningUp = true
	defer func() { r.cleaningUp = false }()
	if r.podUID != "" {
		if _, err := deleteRunnerPod(ctx, r.podRef()); err != nil {
			return fmt.Errorf("delete runner pod: %w", err)
		}
		r.podUID = ""
	}
	if r.registered {
		if err := r.unregister(ctx, true); err != nil {
			return fmt.Errorf("remove force-removed runner from GitHub: %w", err)
		}
	}
	r.registered = false
	if r.reg.SecretName != "" {
		if _, err := deleteRunnerSecret(ctx, r.secretRef()); err != nil {
			return fmt.Errorf("delete runner secret: %w", err)
		}
		r.reg.SecretName, r.reg.SecretUID = "", ""
	}
	return nil
}

// validateForceRemove rejects a force-remove without a reason (the reason is the record of
// who removed a runner mid-job, and why) or of a runner that has already ended.
func (r *runner) validateForceRemove(req ForceRemoveRequest) error {
	if strings.TrimSpace(req.Reason) == "" {
		return fmt.Errorf(`force-remove: a reason is required, e.g. {"reason":"job stuck for 3 days"}`)
	}
	if r.state.Terminal() {
		return fmt.Errorf("runner %s has already ended (%s)", r.in.Name, r.state)
	}
	return nil
}
