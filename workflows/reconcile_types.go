package workflows

import (
	"slices"
	"strings"
	"time"
)

// Activities of the reconcile workflow besides the runner lifecycle's own (ListRunners,
// RemoveRunner, DeleteRunnerSecret and DeleteRunnerPod are reused as they are).
const (
	// ActivityListPoolOwnership lists the pools this Temporal namespace knows (running, and
	// closed within its retention) and, for each running one, the runner names it owns: its
	// runners and its warm registrations (the pool's status query). A read of Temporal.
	ActivityListPoolOwnership = "ListPoolOwnership"
	// ActivityFindEndedWorkflows says which of the given workflow ids have no running workflow
	// (closed, or never started). A read of Temporal.
	ActivityFindEndedWorkflows = "FindEndedWorkflows"
	// ActivityListRunnerObjects lists the pods and Secrets with runnerflow's labels (metadata
	// only: no Secret data leaves the API server). A read of Kubernetes.
	ActivityListRunnerObjects = "ListRunnerObjects"
)

// ReconcileInput is the input of ReconcileWorkflow: the Schedule's action, or an operator's
// one-off `temporal workflow start --type reconcile`. Zero values mean the policy's defaults.
type ReconcileInput struct {
	// DryRun reports what would be removed and removes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Namespace limits the Kubernetes side to one namespace (the worker's --watch-namespace);
	// empty means all namespaces.
	Namespace string `json:"namespace,omitempty"`
	// WarmNamespace is where the worker keeps warm registrations' Secrets (its
	// --warm-namespace). When Namespace names another one, its runnerflow Secrets are listed
	// too, so a warm registration whose pool is gone is removed there; empty lists none.
	WarmNamespace string `json:"warmNamespace,omitempty"`
	// Grace: an object must be seen orphaned twice, this far apart, before it is removed (and a
	// pod or Secret must be at least this old); zero means ReconcileGrace.
	Grace time.Duration `json:"grace,omitempty"`
	// Hook, when set, is the webhook whose failed deliveries the run redelivers, each at most
	// once (reconcile_redeliver.go); zero redelivers nothing.
	Hook HookRef `json:"hook,omitzero"`
}

// OrphanKind is what kind of object a reconcile looked at; the bounded `kind` label of
// MetricReconcileRemoved.
type OrphanKind string

// The kinds of object reconcile removes.
const (
	KindRegistration OrphanKind = "registration"
	KindPod          OrphanKind = "pod"
	KindSecret       OrphanKind = "secret"
)

// ReconcileObject is one GitHub registration, pod or Secret that carries a runnerflow runner's
// name, as reconcile saw it; Reason says why it was left alone or how it went.
type ReconcileObject struct {
	Kind OrphanKind `json:"kind"`
	// Pool and Runner name the runner it belongs to; WorkflowID is that runner's workflow.
	Pool       string `json:"pool"`
	Runner     string `json:"runner"`
	WorkflowID string `json:"workflowId"`
	// Scope and RunnerID address a registration; Busy is GitHub's word when it was listed.
	Scope    *Scope `json:"scope,omitempty"`
	RunnerID int64  `json:"runnerId,omitempty"`
	Busy     bool   `json:"busy,omitempty"`
	// Cluster is the named cluster a pod or Secret is in; empty is the default cluster.
	Cluster string `json:"cluster,omitempty"`
	// Namespace, Name and UID address a pod or Secret; CreatedAt is its creation time.
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	UID       string    `json:"uid,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// OwnerSecret is the Secret that owns a pod (the garbage collector takes the pod with it).
	OwnerSecret string `json:"ownerSecret,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// key names the object within its kind: one registration per scope and runner, one pod or
// Secret per namespace and name.
func (o ReconcileObject) key() string {
	if o.Kind == KindRegistration && o.Scope != nil {
		return string(o.Kind) + "/" + o.Scope.String() + "/" + o.Runner
	}
	if o.Cluster != "" {
		return string(o.Kind) + "/" + o.Cluster + ":" + o.Namespace + "/" + o.Name
	}
	return string(o.Kind) + "/" + o.Namespace + "/" + o.Name
}

// RunnerObject is one pod or Secret with runnerflow's labels, as ListRunnerObjects reports it.
type RunnerObject struct {
	Kind OrphanKind `json:"kind"`
	// Cluster is the named cluster it was listed in (set by the reconcile workflow); empty is
	// the default cluster.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Pool and Runner are its runnerflow.dev/pool and runnerflow.dev/runner labels, WorkflowID
	// its runnerflow.dev/workflow-id annotation.
	Pool       string    `json:"pool,omitempty"`
	Runner     string    `json:"runner,omitempty"`
	WorkflowID string    `json:"workflowId,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	// Deleting is set once the API server has a deletion under way.
	Deleting bool `json:"deleting,omitempty"`
	// OwnerSecret names the Secret that owns a pod, if one does.
	OwnerSecret string `json:"ownerSecret,omitempty"`
}

// ListRunnerObjectsInput names the namespace to list; empty lists all.
type ListRunnerObjectsInput struct {
	Namespace string `json:"namespace,omitempty"`
	// Kinds limits the listing to these kinds (KindPod, KindSecret); empty lists both. The warm
	// namespace holds Secrets only, and the worker may not list pods there.
	Kinds []OrphanKind `json:"kinds,omitempty"`
}

// Lists reports whether the listing covers kind.
func (in ListRunnerObjectsInput) Lists(kind OrphanKind) bool {
	return len(in.Kinds) == 0 || slices.Contains(in.Kinds, kind)
}

// ListRunnerObjectsResult holds the pods and Secrets, sorted by kind, namespace and name.
type ListRunnerObjectsResult struct {
	Objects []RunnerObject `json:"objects,omitempty"`
}

// ListPoolOwnershipInput asks for every pool of the namespace; it has no fields yet.
type ListPoolOwnershipInput struct{}

// PoolOwnership is one pool as reconcile needs it.
type PoolOwnership struct {
	Name string `json:"name"`
	// Running is true while the pool's workflow runs; a closed pool owns nothing any more.
	Running bool `json:"running"`
	// Scope is where its runners register (zero when a closed pool's is not known).
	Scope Scope `json:"scope"`
	// Clusters are the named clusters a running pool places runners on, and those its runners
	// are on, sorted: reconcile lists pods and Secrets there too.
	Clusters []string `json:"clusters,omitempty"`
	// Owned lists the runner names a running pool owns, sorted: its runners (including those
	// whose workflow has not started yet) and its warm registrations.
	Owned []string `json:"owned,omitempty"`
	// Unavailable says why a running pool's status could not be read; none of its objects is
	// touched then.
	Unavailable string `json:"unavailable,omitempty"`
}

// ListPoolOwnershipResult lists the pools sorted by name.
type ListPoolOwnershipResult struct {
	Pools []PoolOwnership `json:"pools,omitempty"`
}

// FindEndedWorkflowsInput names the workflow ids to look up.
type FindEndedWorkflowsInput struct {
	WorkflowIDs []string `json:"workflowIds"`
}

// FindEndedWorkflowsResult lists the ids, of those asked, with no running workflow.
type FindEndedWorkflowsResult struct {
	Ended []string `json:"ended,omitempty"`
}

// ReconcilePhase is where a reconcile run is.
type ReconcilePhase string

// The phases of a reconcile run, in order.
const (
	ReconcileObserving ReconcilePhase = "observing"
	ReconcileWaiting   ReconcilePhase = "waiting for the grace period"
	ReconcileConfirm   ReconcilePhase = "confirming"
	ReconcileRemoving  ReconcilePhase = "removing"
	ReconcileDone      ReconcilePhase = "done"
)

// ReconcileCounts counts what a reconcile listed.
type ReconcileCounts struct {
	// Registrations are the registrations with runnerflow's runner names in the listed scopes.
	Registrations int `json:"registrations"`
	Pods          int `json:"pods"`
	Secrets       int `json:"secrets"`
}

// ReconcileReport is ReconcileWorkflow's result and the answer of its status query while it runs.
type ReconcileReport struct {
	DryRun     bool           `json:"dryRun,omitempty"`
	Phase      ReconcilePhase `json:"phase"`
	StartedAt  time.Time      `json:"startedAt"`
	FinishedAt time.Time      `json:"finishedAt,omitzero"`
	Grace      time.Duration  `json:"grace"`
	// Pools counts the pools the namespace knows; Scopes are the GitHub scopes listed.
	Pools  int             `json:"pools"`
	Scopes []string        `json:"scopes,omitempty"`
	Listed ReconcileCounts `json:"listed"`
	// Orphans are the objects found orphaned twice, Grace apart: removed below, or, in a dry
	// run, what would be removed.
	Orphans []ReconcileObject `json:"orphans,omitempty"`
	// Removed are the orphans removed (Reason "already gone" when someone was faster, "with its
	// Secret" for a pod the garbage collector takes).
	Removed []ReconcileObject `json:"removed,omitempty"`
	// Skipped are objects with runnerflow's names left alone, each with the reason.
	Skipped []ReconcileObject `json:"skipped,omitempty"`
	// Failed are orphans whose removal failed (the next run tries again), with the error.
	Failed []ReconcileObject `json:"failed,omitempty"`
	// Errors are listings that failed; nothing they would have listed was considered.
	Errors []string `json:"errors,omitempty"`
	// Deliveries is the redelivery of the hook's failed webhook deliveries, when a hook is set.
	Deliveries *DeliveryReport `json:"deliveries,omitempty"`
}

// ParseScope reads a scope written by Scope.String (the pool's RunnerPoolScope search
// attribute): "repo:owner/repo", "org:acme" or "enterprise:slug".
func ParseScope(s string) (Scope, bool) {
	kind, value, ok := strings.Cut(s, ":")
	if !ok || value == "" {
		return Scope{}, false
	}
	switch kind {
	case "repo":
		return Scope{Repository: value}, true
	case "org":
		return Scope{Organization: value}, true
	case "enterprise":
		return Scope{Enterprise: value}, true
	}
	return Scope{}, false
}
