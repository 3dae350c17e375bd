package workflows

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// This file holds reconcile's decisions, pure functions of what was listed: which objects carry
// a runnerflow runner's name, which of those no live pool owns, which are orphans once their
// runner workflow is known to have ended, and in what order orphans are removed.

// Why reconcile leaves an object alone (ReconcileObject.Reason).
const (
	SkipUnknownPool  = "pool unknown to this Temporal namespace (never ran here, or closed beyond its retention)"
	SkipYoung        = "younger than the grace period"
	SkipUnlisted     = "its pool's GitHub scope was not listed, so a busy registration could not be seen"
	SkipBusy         = "busy at GitHub: a runner running a job is never removed"
	SkipBusyRunner   = "its runner's registration is busy"
	RemovedGone      = "already gone"
	RemovedWithOwner = "with its Secret (garbage collector)"
)

// reconcileRunnerName recovers the pool from a name RunnerName made: a pool, a generation of
// four hexadecimal digits (Generation) and a base-36 sequence. Stricter than PoolFromRunnerName,
// so that a runner someone named by hand ("build-fast-1") is never taken for runnerflow's.
func reconcileRunnerName(name string) (string, bool) {
	pool, ok := PoolFromRunnerName(name)
	if !ok {
		return "", false
	}
	parts := strings.Split(name, "-")
	gen, seq := parts[len(parts)-2], parts[len(parts)-1]
	hex := func(r rune) bool { return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') }
	base36 := func(r rune) bool { return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') }
	if !allRunes(gen, hex) || !allRunes(seq, base36) {
		return "", false
	}
	return pool, true
}

func allRunes(s string, ok func(rune) bool) bool {
	for _, r := range s {
		if !ok(r) {
			return false
		}
	}
	return true
}

// ReconcileScopes are the GitHub scopes to list: every known pool's, running or closed, once
// each, in a stable order.
func ReconcileScopes(pools []PoolOwnership) []Scope {
	var out []Scope
	for _, p := range pools {
		if p.Scope.Validate() == nil && !slices.Contains(out, p.Scope) {
			out = append(out, p.Scope)
		}
	}
	slices.SortFunc(out, func(a, b Scope) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// ReconcileClusters are the named clusters the pools name, distinct and sorted: reconcile lists
// pods and Secrets in each besides the default cluster. A cluster a closed pool used is not
// known; a runner there that ended removes its own objects when the cluster answers
// (ClusterReturnPolicy).
func ReconcileClusters(pools []PoolOwnership) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Clusters...)
	}
	out = slices.DeleteFunc(out, func(c string) bool { return c == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// ScopeRunners is one scope's listing.
type ScopeRunners struct {
	Scope   Scope
	Runners []RunnerListing
}

// InventoryObjects turns the listings into objects: the registrations whose names are
// runnerflow runner names, and the pods and Secrets that carry a pool and a runner label and
// are not being deleted already.
func InventoryObjects(scopes []ScopeRunners, objects []RunnerObject) []ReconcileObject {
	var out []ReconcileObject
	for _, s := range scopes {
		for _, l := range s.Runners {
			pool, ok := reconcileRunnerName(l.Name)
			if !ok {
				continue
			}
			scope := s.Scope
			out = append(out, ReconcileObject{
				Kind: KindRegistration, Pool: pool, Runner: l.Name, WorkflowID: RunnerWorkflowID(pool, l.Name),
				Scope: &scope, RunnerID: l.ID, Busy: l.Busy,
			})
		}
	}
	for _, o := range objects {
		if o.Pool == "" || o.Runner == "" || o.Deleting {
			continue
		}
		id := o.WorkflowID
		if id == "" {
			id = RunnerWorkflowID(o.Pool, o.Runner)
		}
		out = append(out, ReconcileObject{
			Kind: o.Kind, Pool: o.Pool, Runner: o.Runner, WorkflowID: id, Cluster: o.Cluster,
			Namespace: o.Namespace, Name: o.Name, UID: o.UID, CreatedAt: o.CreatedAt, OwnerSecret: o.OwnerSecret,
		})
	}
	return out
}

// ClassifyInput is what ClassifyObjects decides on.
type ClassifyInput struct {
	Objects []ReconcileObject
	Pools   []PoolOwnership
	// Listed are the scopes whose runner listing succeeded.
	Listed []Scope
	Now    time.Time
	Grace  time.Duration
}

// ClassifyObjects sorts objects into candidates (no live pool owns them: orphans if their runner
// workflow has ended) and skipped ones, each with its reason. Objects a running pool owns (its
// runners, its warm registrations) are neither: they are simply the pool's. The rules, in order:
//   - a pool this namespace does not know: skipped (another deployment's, or long gone);
//   - a running pool whose status could not be read: skipped (its warm registrations are unknown);
//   - a name a running pool owns: the pool's;
//   - a pod or Secret younger than the grace period: skipped (the next run looks again);
//   - a pod or Secret of a pool whose scope was not listed: skipped (its registration might be
//     busy, and the job runs in that pod);
//   - anything else, including everything of a closed pool: a candidate.
func ClassifyObjects(in ClassifyInput) (candidates, skipped []ReconcileObject) {
	for _, o := range in.Objects {
		i := slices.IndexFunc(in.Pools, func(p PoolOwnership) bool { return p.Name == o.Pool })
		if i < 0 {
			skipped = append(skipped, withReason(o, SkipUnknownPool))
			continue
		}
		p := in.Pools[i]
		switch {
		case p.Running && p.Unavailable != "":
			skipped = append(skipped, withReason(o, "pool status unavailable: "+p.Unavailable))
		case p.Running && slices.Contains(p.Owned, o.Runner):
		case o.Kind != KindRegistration && in.Now.Sub(o.CreatedAt) < in.Grace:
			skipped = append(skipped, withReason(o, SkipYoung))
		case o.Kind != KindRegistration && !slices.Contains(in.Listed, p.Scope):
			skipped = append(skipped, withReason(o, SkipUnlisted))
		default:
			candidates = append(candidates, o)
		}
	}
	return candidates, skipped
}

// CandidateWorkflows are the distinct runner workflow ids of the candidates, sorted.
func CandidateWorkflows(candidates []ReconcileObject) []string {
	var ids []string
	for _, o := range candidates {
		ids = append(ids, o.WorkflowID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// ConfirmOrphans keeps the candidates whose runner workflow has ended: those are orphans. A
// registration GitHub lists busy is never one (its runner runs a job), and neither are its
// runner's pod and Secret, which that job runs in.
func ConfirmOrphans(candidates []ReconcileObject, ended []string) (orphans, skipped []ReconcileObject) {
	var busy []string
	for _, o := range candidates {
		if o.Kind == KindRegistration && o.Busy && slices.Contains(ended, o.WorkflowID) {
			busy = append(busy, o.WorkflowID)
		}
	}
	for _, o := range candidates {
		switch {
		case !slices.Contains(ended, o.WorkflowID):
		case o.Kind == KindRegistration && o.Busy:
			skipped = append(skipped, withReason(o, SkipBusy))
		case slices.Contains(busy, o.WorkflowID):
			skipped = append(skipped, withReason(o, SkipBusyRunner))
		default:
			orphans = append(orphans, o)
		}
	}
	return orphans, skipped
}

// RemovalPlan is the order in which orphans go: registrations first (GitHub refuses a busy one,
// and then its runner's pod and Secret stay), then Secrets, each taking the pods it owns with
// it, then the pods no orphaned Secret owns.
type RemovalPlan struct {
	Registrations []ReconcileObject
	Secrets       []ReconcileObject
	Pods          []ReconcileObject
	// WithSecret are pods owned by one of Secrets: the garbage collector takes them.
	WithSecret []ReconcileObject
}

// PlanRemoval orders the orphans, each kind sorted by its key.
func PlanRemoval(orphans []ReconcileObject) RemovalPlan {
	var p RemovalPlan
	for _, o := range orphans {
		switch o.Kind {
		case KindRegistration:
			p.Registrations = append(p.Registrations, o)
		case KindSecret:
			p.Secrets = append(p.Secrets, o)
		}
	}
	for _, o := range orphans {
		if o.Kind != KindPod {
			continue
		}
		if o.OwnerSecret != "" && slices.ContainsFunc(p.Secrets, func(s ReconcileObject) bool {
			return s.Cluster == o.Cluster && s.Namespace == o.Namespace && s.Name == o.OwnerSecret
		}) {
			p.WithSecret = append(p.WithSecret, o)
		} else {
			p.Pods = append(p.Pods, o)
		}
	}
	for _, list := range [][]ReconcileObject{p.Registrations, p.Secrets, p.Pods, p.WithSecret} {
		slices.SortFunc(list, func(a, b ReconcileObject) int { return cmp.Compare(a.key(), b.key()) })
	}
	return p
}

// WithoutRunners drops the pods and Secrets of the given runner workflows (their registration
// turned out busy) from the plan and returns them as skipped.
func (p RemovalPlan) WithoutRunners(workflowIDs []string) (RemovalPlan, []ReconcileObject) {
	var skipped []ReconcileObject
	keep := func(list []ReconcileObject) []ReconcileObject {
		var out []ReconcileObject
		for _, o := range list {
			if slices.Contains(workflowIDs, o.WorkflowID) {
				skipped = append(skipped, withReason(o, SkipBusyRunner))
			} else {
				out = append(out, o)
			}
		}
		return out
	}
	p.Secrets, p.Pods, p.WithSecret = keep(p.Secrets), keep(p.Pods), keep(p.WithSecret)
	return p, skipped
}

func withReason(o ReconcileObject, reason string) ReconcileObject {
	o.Reason = reason
	return o
}
