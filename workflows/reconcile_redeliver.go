package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// Reconcile change ids (workflow.GetVersion); what each changes is in Changes (changes.go).
const (
	changeRedeliver     = "reconcile-redeliver"
	changeHarmlessProbe = "reconcile-harmless-probe"
	changeWarmNamespace = "reconcile-warm-namespace"
)

// MetricReconcileRedelivered counts the webhook deliveries reconcile redelivered (GitHub accepted
// the redelivery); the Prometheus bridge exports it as runnerflow_reconcile_redelivered_total.
const MetricReconcileRedelivered = "runnerflow_reconcile_redelivered"

// ReconcileRedelivering is the phase of a run redelivering failed webhook deliveries.
const ReconcileRedelivering ReconcilePhase = "redelivering"

// redeliverIfConfigured runs the redelivery step when the input names a hook (and the run's
// history was not written before the step existed).
func (r *reconcile) redeliverIfConfigured() {
	if r.in.Hook.IsZero() || workflow.GetVersion(r.ctx, changeRedeliver, workflow.DefaultVersion, 1) < 1 {
		return
	}
	r.report.Phase = ReconcileRedelivering
	r.report.Deliveries = r.redeliver(previousRemembered(r.ctx))
}

// previousRemembered reads the guids the previous scheduled run remembered from its result,
// which the Schedule hands to the next run (none for a run started by hand, or after a run that
// failed: then GitHub's own redelivery flags are the record).
func previousRemembered(ctx workflow.Context) []RememberedDelivery {
	var prev ReconcileReport
	if !workflow.HasLastCompletionResult(ctx) || workflow.GetLastCompletionResult(ctx, &prev) != nil || prev.Deliveries == nil {
		return nil
	}
	return prev.Deliveries.Remembered
}

// redeliver lists the hook's deliveries in the window, plans and sends the redeliveries (one
// POST each, at most ReconcileBatch at a time) and returns the report with the memory for the
// next run. A dry run sends nothing and carries the memory as it was.
func (r *reconcile) redeliver(prev []RememberedDelivery) *DeliveryReport {
	since := workflow.Now(r.ctx).Add(-ReconcileRedeliverWindow)
	rep := &DeliveryReport{Hook: r.in.Hook.String(), Since: since, Remembered: CarryRemembered(prev, nil, since)}
	listed, err := runActivity[ListHookDeliveriesInput, ListHookDeliveriesResult](r.ctx, ReconcileDeliveryListingPolicy,
		ActivityListHookDeliveries, ListHookDeliveriesInput{Hook: r.in.Hook, Since: since})
	if err != nil {
		rep.Error = "list deliveries of hook " + rep.Hook + ": " + err.Error()
		return rep
	}
	rep.Listed, rep.Pages, rep.Truncated, rep.Failed = listed.Listed, listed.Pages, listed.Truncated, len(listed.Failed)
	spend := workflow.GetVersion(r.ctx, changeHarmlessProbe, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	plan := PlanRedeliveries(RedeliveryPlanInput{Summary: listed.DeliverySummary, Remembered: rep.Remembered,
		CanPing: r.in.Hook.CanPing(), SpendEvent: spend})
	rep.AlreadyRedelivered, rep.Deferred, rep.Probe = plan.AlreadyRedelivered, plan.Deferred, plan.Probe
	if !spend {
		rep.ProbeBy = plan.ProbeBy
	}
	for _, f := range plan.Redeliver {
		rep.Redeliveries = append(rep.Redeliveries, Redelivery{FailedEvent: f})
	}
	if plan.ProbeDelivery != nil {
		rep.ProbeGUID = plan.ProbeDelivery.GUID
	}
	if r.in.DryRun {
		return rep
	}
	r.probe(plan, rep)
	if len(plan.Redeliver) == 0 {
		return rep
	}
	errs := inBatches(r.ctx, plan.Redeliver, func(ctx workflow.Context, f FailedEvent) workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ReconcileRedeliverPolicy), ActivityRedeliverHookDelivery,
			RedeliverHookDeliveryInput{Hook: r.in.Hook, DeliveryID: f.DeliveryID, GUID: f.GUID})
	}, r.discard)
	var added []RememberedDelivery
	now := workflow.Now(r.ctx)
	for i, err := range errs {
		if err != nil {
			// Not remembered: the next run sees in GitHub's listing whether GitHub made the
			// attempt anyway (an answer lost on the way) and redelivers only if it did not.
			rep.Redeliveries[i].Error = err.Error()
			continue
		}
		rep.Redelivered++
		added = append(added, RememberedDelivery{GUID: plan.Redeliver[i].GUID, At: now})
		workflow.GetMetricsHandler(r.ctx).Counter(MetricReconcileRedelivered).Inc(1)
	}
	rep.Remembered = CarryRemembered(rep.Remembered, added, since)
	r.logger.Info("Redelivered failed webhook deliveries", "hook", rep.Hook, "failed", rep.Failed,
		"redelivered", rep.Redelivered, "alreadyRedelivered", rep.AlreadyRedelivered, "deferred", rep.Deferred)
	return rep
}

// probe sends the plan's harmless probe of a hook whose newest delivery failed: GitHub's ping,
// or the redelivery of a delivery that succeeded. Its attempt is the hook's newest when the
// next run lists, which redelivers the failed events if it succeeded.
func (r *reconcile) probe(plan RedeliveryPlan, rep *DeliveryReport) {
	ctx := workflow.WithActivityOptions(r.ctx, ReconcileProbePolicy)
	var err error
	switch plan.ProbeBy {
	case ProbePing:
		err = workflow.ExecuteActivity(ctx, ActivityPingHook, PingHookInput{Hook: r.in.Hook}).Get(ctx, nil)
	case ProbeSucceededDelivery:
		err = workflow.ExecuteActivity(ctx, ActivityRedeliverHookDelivery, RedeliverHookDeliveryInput{
			Hook: r.in.Hook, DeliveryID: plan.ProbeDelivery.ID, GUID: plan.ProbeDelivery.GUID}).Get(ctx, nil)
	default:
		return
	}
	if err != nil {
		rep.ProbeError = err.Error()
	}
	r.logger.Info("Probed a hook whose newest delivery failed", "hook", rep.Hook, "probe", plan.ProbeBy, "error", rep.ProbeError)
}
