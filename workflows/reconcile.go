package workflows

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// MetricReconcileRemoved counts what reconcile removed, by kind (registration, pod, secret);
// the Prometheus bridge exports it as runnerflow_reconcile_removed_total.
const MetricReconcileRemoved = "runnerflow_reconcile_removed"

// ReconcileWorkflow removes what runner workflows left behind: GitHub registrations, pods and
// Secrets with runnerflow runner names whose runner workflow is not running and that no live
// pool owns (a pool's warm registrations have no workflow yet and are the pool's). The Temporal
// Schedule ReconcileScheduleID starts one every interval; it is short-lived and starts fresh
// each time, so it needs no continue-as-new and carries nothing from run to run.
//
// Nothing is removed on one look: an object must be found orphaned twice, Grace apart (GitHub
// lists no creation time, and a runner's objects exist a moment before Temporal shows its
// workflow). A busy registration is never removed, nor its runner's pod and Secret. A dry run
// reports what it would remove. The status query answers the report so far.
func ReconcileWorkflow(ctx workflow.Context, in ReconcileInput) (ReconcileReport, error) {
	r := &reconcile{ctx: ctx, in: in, logger: workflow.GetLogger(ctx)}
	r.report = ReconcileReport{DryRun: in.DryRun, Phase: ReconcileObserving, StartedAt: workflow.Now(ctx), Grace: in.Grace}
	if r.report.Grace <= 0 {
		r.report.Grace = ReconcileGrace
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (ReconcileReport, error) { return r.report, nil }); err != nil {
		return r.report, err
	}
	return r.run()
}

// reconcile is one run: its input, the report it builds, and the steps of run().
type reconcile struct {
	ctx    workflow.Context
	in     ReconcileInput
	logger log.Logger
	report ReconcileReport
	// listed are the scopes whose runner listing succeeded in the first look.
	listed []Scope
}

func (r *reconcile) run() (ReconcileReport, error) {
	r.redeliverIfConfigured()
	r.report.Phase = ReconcileObserving
	found, err := r.observe()
	if err != nil {
		return r.report, err
	}
	if len(found) > 0 {
		r.report.Phase = ReconcileWaiting
		if err := workflow.Sleep(r.ctx, r.report.Grace); err != nil {
			return r.report, err
		}
		r.report.Phase = ReconcileConfirm
		if found, err = r.confirm(found); err != nil {
			return r.report, err
		}
	}
	r.report.Orphans = found
	if !r.in.DryRun && len(found) > 0 {
		r.report.Phase = ReconcileRemoving
		r.remove(PlanRemoval(found))
	}
	r.report.Phase, r.report.FinishedAt = ReconcileDone, workflow.Now(r.ctx)
	r.logger.Info("Reconciled", "dryRun", r.in.DryRun, "orphans", len(r.report.Orphans), "removed", len(r.report.Removed),
		"skipped", len(r.report.Skipped), "failed", len(r.report.Failed), "errors", len(r.report.Errors))
	return r.report, nil
}

// observe lists the pools, then what exists at GitHub and in the cluster, then the pools again
// (so an object listed is judged against ownership read after it existed), and returns the
// objects no live pool owns whose runner workflow has ended.
func (r *reconcile) observe() ([]ReconcileObject, error) {
	pools, err := runActivity[ListPoolOwnershipInput, ListPoolOwnershipResult](r.ctx, ReconcileReadPolicy, ActivityListPoolOwnership, ListPoolOwnershipInput{})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	objects := r.list(ReconcileScopes(pools.Pools), ReconcileClusters(pools.Pools))
	if pools, err = runActivity[ListPoolOwnershipInput, ListPoolOwnershipResult](r.ctx, ReconcileReadPolicy, ActivityListPoolOwnership, ListPoolOwnershipInput{}); err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	r.report.Pools = len(pools.Pools)
	return r.orphans(objects, pools.Pools)
}

// confirm looks at the first look's orphans again, a grace period later: still owned by no live
// pool, runner workflow still ended.
func (r *reconcile) confirm(found []ReconcileObject) ([]ReconcileObject, error) {
	pools, err := runActivity[ListPoolOwnershipInput, ListPoolOwnershipResult](r.ctx, ReconcileReadPolicy, ActivityListPoolOwnership, ListPoolOwnershipInput{})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return r.orphans(found, pools.Pools)
}

// orphans classifies objects against the pools and asks Temporal which candidates' runner
// workflows have ended.
func (r *reconcile) orphans(objects []ReconcileObject, pools []PoolOwnership) ([]ReconcileObject, error) {
	candidates, skipped := ClassifyObjects(ClassifyInput{
		Objects: objects, Pools: pools, Listed: r.listed, Now: workflow.Now(r.ctx), Grace: r.report.Grace,
	})
	r.report.Skipped = append(r.report.Skipped, skipped...)
	if len(candidates) == 0 {
		return nil, nil
	}
	ended, err := runActivity[FindEndedWorkflowsInput, FindEndedWorkflowsResult](r.ctx, ReconcileReadPolicy,
		ActivityFindEndedWorkflows, FindEndedWorkflowsInput{WorkflowIDs: CandidateWorkflows(candidates)})
	if err != nil {
		return nil, fmt.Errorf("find ended runner workflows: %w", err)
	}
	orphans, skipped := ConfirmOrphans(candidates, ended.Ended)
	r.report.Skipped = append(r.report.Skipped, skipped...)
	return orphans, nil
}

// list runs the GitHub listings (one paginated call per scope) and the Kubernetes listing side
// by side. A listing that fails is reported; what it would have listed is left for the next run.
func (r *reconcile) list(scopes []Scope, clusters []string) []ReconcileObject {
	listings := make([]workflow.Future, len(scopes))
	for i, s := range scopes {
		r.report.Scopes = append(r.report.Scopes, s.String())
		listings[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, ReconcileListingPolicy),
			ActivityListRunners, ListRunnersInput{Scope: s})
	}
	kube := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, ReconcileReadPolicy),
		ActivityListRunnerObjects, ListRunnerObjectsInput{Namespace: r.in.Namespace})
	named := r.listNamedClusters(clusters)
	var warm workflow.Future
	if in, ok := r.warmListing(); ok {
		warm = workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, ReconcileReadPolicy), ActivityListRunnerObjects, in)
	}
	var listed []ScopeRunners
	for i, f := range listings {
		var res ListRunnersResult
		if err := f.Get(r.ctx, &res); err != nil {
			r.report.Errors = append(r.report.Errors, fmt.Sprintf("list runners of %s: %v", scopes[i], err))
			continue
		}
		listed = append(listed, ScopeRunners{Scope: scopes[i], Runners: res.Runners})
		r.listed = append(r.listed, scopes[i])
	}
	var objects, warmObjects ListRunnerObjectsResult
	if err := kube.Get(r.ctx, &objects); err != nil {
		r.report.Errors = append(r.report.Errors, fmt.Sprintf("list pods and Secrets: %v", err))
	}
	objects.Objects = append(objects.Objects, r.namedObjects(named)...)
	if warm != nil {
		if err := warm.Get(r.ctx, &warmObjects); err != nil {
			r.report.Errors = append(r.report.Errors, fmt.Sprintf("list warm Secrets in %s: %v", r.in.WarmNamespace, err))
		}
		objects.Objects = append(objects.Objects, warmObjects.Objects...)
	}
	all := InventoryObjects(listed, objects.Objects)
	for _, o := range all {
		switch o.Kind {
		case KindRegistration:
			r.report.Listed.Registrations++
		case KindPod:
			r.report.Listed.Pods++
		case KindSecret:
			r.report.Listed.Secrets++
		}
	}
	return all
}

// changeReconcileNamedClusters gates listing pods and Secrets in the named clusters the pools
// name (ReconcileClusters), besides the default cluster. Asked only when a pool names one, so
// a run without named clusters carries no marker.
const changeReconcileNamedClusters = "reconcile-named-clusters"

// clusterListing is one named cluster's pending pod and Secret listing.
type clusterListing struct {
	cluster string
	future  workflow.Future
}

// listNamedClusters starts a listing of each named cluster, on that cluster's task queue.
func (r *reconcile) listNamedClusters(clusters []string) []clusterListing {
	if len(clusters) == 0 || workflow.GetVersion(r.ctx, changeReconcileNamedClusters, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	out := make([]clusterListing, len(clusters))
	for i, c := range clusters {
		out[i] = clusterListing{cluster: c, future: workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx,
			ForCluster(ReconcileReadPolicy, c)), ActivityListRunnerObjects, ListRunnerObjectsInput{Namespace: r.in.Namespace})}
	}
	return out
}

// namedObjects collects the named clusters' listings, each object marked with its cluster. A
// cluster that does not answer is reported; its objects wait for a later run.
func (r *reconcile) namedObjects(listings []clusterListing) []RunnerObject {
	var out []RunnerObject
	for _, l := range listings {
		var res ListRunnerObjectsResult
		if err := l.future.Get(r.ctx, &res); err != nil {
			r.report.Errors = append(r.report.Errors, fmt.Sprintf("list pods and Secrets of cluster %s: %v", l.cluster, err))
			continue
		}
		for _, o := range res.Objects {
			o.Cluster = l.cluster
			out = append(out, o)
		}
	}
	return out
}

// warmListing is the listing of the warm namespace's Secrets, when the run has one apart from
// the namespace it lists (a run over all namespaces lists the warm one anyway). Warm
// registrations' Secrets wait there, labelled as any runner's, so an orphaned one is judged
// and removed like any other Secret.
func (r *reconcile) warmListing() (ListRunnerObjectsInput, bool) {
	ns := r.in.WarmNamespace
	if ns == "" || r.in.Namespace == "" || ns == r.in.Namespace ||
		workflow.GetVersion(r.ctx, changeWarmNamespace, workflow.DefaultVersion, 1) < 1 {
		return ListRunnerObjectsInput{}, false
	}
	return ListRunnerObjectsInput{Namespace: ns, Kinds: []OrphanKind{KindSecret}}, true
}

// remove carries out the plan: registrations (a busy one keeps its runner's pod and Secret),
// then Secrets, then the pods no removed Secret takes with it.
func (r *reconcile) remove(plan RemovalPlan) {
	busy := r.removeRegistrations(plan.Registrations)
	plan, skipped := plan.WithoutRunners(busy)
	r.report.Skipped = append(r.report.Skipped, skipped...)
	secrets := inBatches(r.ctx, plan.Secrets, func(ctx workflow.Context, o ReconcileObject) workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ForCluster(ReconcileDeletePolicy, o.Cluster)),
			ActivityDeleteRunnerSecret, SecretRef{Cluster: o.Cluster, Namespace: o.Namespace, Name: o.Name})
	}, r.discard)
	var gone []ReconcileObject
	for i, err := range secrets {
		if r.record(plan.Secrets[i], err, "") {
			gone = append(gone, plan.Secrets[i])
		}
	}
	for _, pod := range plan.WithSecret {
		owned := func(s ReconcileObject) bool {
			return s.Cluster == pod.Cluster && s.Namespace == pod.Namespace && s.Name == pod.OwnerSecret
		}
		if slices.ContainsFunc(gone, owned) {
			r.record(pod, nil, RemovedWithOwner)
		} else {
			plan.Pods = append(plan.Pods, pod) // its Secret stayed: the pod goes by itself
		}
	}
	pods := inBatches(r.ctx, plan.Pods, func(ctx workflow.Context, o ReconcileObject) workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ForCluster(ReconcileDeletePolicy, o.Cluster)),
			ActivityDeleteRunnerPod, PodRef{Cluster: o.Cluster, Namespace: o.Namespace, Name: o.Name, UID: o.UID})
	}, r.discard)
	for i, err := range pods {
		r.record(plan.Pods[i], err, "")
	}
}

// removeRegistrations removes each registration with one DELETE and returns the runner
// workflows whose registration GitHub refused as busy (422).
func (r *reconcile) removeRegistrations(regs []ReconcileObject) []string {
	outs := make([]RemoveRunnerOutput, len(regs))
	errs := inBatches(r.ctx, regs, func(ctx workflow.Context, o ReconcileObject) workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ReconcileRemoveRegistrationPolicy),
			ActivityRemoveRunner, RunnerRef{Scope: *o.Scope, RunnerID: o.RunnerID, Name: o.Runner})
	}, func(i int, f workflow.Future) error { return f.Get(r.ctx, &outs[i]) })
	var busy []string
	for i, err := range errs {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrRunnerBusy {
			busy = append(busy, regs[i].WorkflowID)
			r.report.Skipped = append(r.report.Skipped, withReason(regs[i], SkipBusy))
			continue
		}
		note := ""
		if err == nil && !outs[i].Removed {
			note = RemovedGone
		}
		r.record(regs[i], err, note)
	}
	return busy
}

// record reports one removal's outcome and counts what was removed; it returns whether the
// object is gone.
func (r *reconcile) record(o ReconcileObject, err error, note string) bool {
	if err != nil {
		r.report.Failed = append(r.report.Failed, withReason(o, err.Error()))
		return false
	}
	r.report.Removed = append(r.report.Removed, withReason(o, note))
	if note != RemovedGone {
		workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"kind": string(o.Kind)}).Counter(MetricReconcileRemoved).Inc(1)
	}
	return true
}

// discard waits for an activity whose result says nothing.
func (r *reconcile) discard(_ int, f workflow.Future) error { return f.Get(r.ctx, nil) }

// inBatches starts one activity per object, at most ReconcileBatch at a time (futures, no
// goroutines), and returns each one's error in order; get waits for the i-th and decodes it.
func inBatches[T any](ctx workflow.Context, objs []T, start func(workflow.Context, T) workflow.Future,
	get func(int, workflow.Future) error) []error {
	errs := make([]error, len(objs))
	for from := 0; from < len(objs); from += ReconcileBatch {
		to := min(from+ReconcileBatch, len(objs))
		futures := make([]workflow.Future, 0, to-from)
		for _, o := range objs[from:to] {
			futures = append(futures, start(ctx, o))
		}
		for i, f := range futures {
			errs[from+i] = get(from+i, f)
		}
	}
	return errs
}
