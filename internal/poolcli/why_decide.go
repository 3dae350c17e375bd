package poolcli

import (
	"fmt"
	"strings"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// Cause is why a queued job has no runner yet: a small fixed set, so it can also be a metric
// label.
type Cause string

// The causes, from the job's side outward. CauseNone: the job is not waiting (it started).
const (
	CauseNone         Cause = ""
	CauseNotReceived  Cause = "not-received"
	CauseNoPool       Cause = "no-matching-pool"
	CausePaused       Cause = "pool-paused"
	CauseAtMax        Cause = "pool-at-max"
	CauseOverride     Cause = "scheduled-override"
	CauseBudget       Cause = "github-budget"
	CausePace         Cause = "github-pace"
	CauseQuota        Cause = "quota"
	CauseUnreachable  Cause = "cluster-unreachable"
	CausePodPending   Cause = "pod-pending"
	CauseNotOnline    Cause = "runner-not-online"
	CauseUnassigned   Cause = "not-yet-assigned"
	CauseStarting     Cause = "runner-starting"
	CauseScaling      Cause = "pool-deciding"
	CauseNoPoolExists Cause = "no-pools"
	// A scale-set pool hears of its jobs from its set's listener, not from webhooks: a job
	// its set does not hold yet waits at GitHub or at the listener (why_scaleset_decide.go).
	CauseSetNotListening Cause = "scaleset-not-listening"
	CauseSetOffered      Cause = "scaleset-offered"
	CauseSetNotAssigned  Cause = "scaleset-not-assigned"
)

// WhyFacts is everything `why` read about one job, gathered by gatherWhy; decideCause judges
// from it alone.
type WhyFacts struct {
	Now time.Time `json:"now"`
	// Pools is how many pools run; zero means no pool can hold anything.
	Pools int `json:"pools"`
	// Running is set when one of Pool's runners reports the job as its own (Runner is it).
	Running bool `json:"running,omitempty"`
	// Reservation is the job's reservation in Pool; nil when no pool holds it.
	Reservation *workflows.Reservation `json:"reservation,omitempty"`
	// QueuedAt is when the job was queued as its pool heard it (its reservation's QueuedAt:
	// the intake took the queued event), kept once it runs and Reservation is dropped.
	QueuedAt time.Time `json:"queuedAt,omitzero"`
	// Prewarmed is set when Pool warmed runners for the job before GitHub queued it.
	Prewarmed *workflows.PrewarmedJob `json:"prewarmed,omitempty"`
	// Pool is the status of the pool that holds the job (or runs it).
	Pool *workflows.PoolStatus `json:"-"`
	// Runner is the runner that runs the job, or else the pool's oldest runner not yet online:
	// the one the job most likely waits for.
	Runner *RunnerFacts `json:"runner,omitempty"`
	// Unmatched is set when the intake recorded the job as matching no pool.
	Unmatched *workflows.UnmatchedJob `json:"unmatched,omitempty"`
	// NearMisses are the pools whose labels came closest to an unmatched job's.
	NearMisses []NearMiss `json:"nearMisses,omitempty"`
	// Pulled are the pools that read their demand from GitHub by pull: they count queued jobs
	// and hold no job by id, so a job only they serve is never held.
	Pulled []PulledPool `json:"pulled,omitempty"`
	// ScaleSets are the scale-set pools' sets, each with where the job stands in it.
	ScaleSets []ScaleSetFacts `json:"scaleSets,omitempty"`
	// ScaleSet is the one of ScaleSets that knows the job (Pool is its pool); nil when none
	// does.
	ScaleSet *ScaleSetFacts `json:"-"`
}

// PulledPool is a pool's last pull, as its status reports it.
type PulledPool struct {
	Pool   string    `json:"pool"`
	At     time.Time `json:"at,omitzero"`
	Queued int       `json:"queued"`
}

// RunnerFacts is one runner workflow as `why` sees it: its status query, its description's
// pending activity and, when `why` may read Kubernetes, its pod.
type RunnerFacts struct {
	WorkflowID string                 `json:"workflowId"`
	Started    time.Time              `json:"started"`
	Status     workflows.RunnerStatus `json:"status"`
	// Activity is the runner's pending activity that has waited longest, if any.
	Activity *PendingActivity `json:"activity,omitempty"`
	// PodWaiting is what the pod itself says while it is Pending (unschedulable, image pull
	// failing); PodRead is set when `why` read the pod.
	PodWaiting string `json:"podWaiting,omitempty"`
	PodRead    bool   `json:"podRead,omitempty"`
	// PodScheduled is when the pod was bound to a node (zero: not yet, or not read).
	PodScheduled time.Time `json:"podScheduled,omitzero"`
	// UILink opens the runner's workflow in the Temporal UI.
	UILink string `json:"uiLink,omitempty"`
}

// PendingActivity is an activity the runner workflow waits on, from its description.
type PendingActivity struct {
	Type string `json:"type"`
	// Started is false while the activity waits to be picked up (a rate-limited task queue).
	Started     bool      `json:"started"`
	Scheduled   time.Time `json:"scheduled,omitzero"`
	Attempt     int32     `json:"attempt"`
	FailureType string    `json:"failureType,omitempty"`
	Failure     string    `json:"failure,omitempty"`
	// NextAttempt is when a failed activity is tried again (the budget's reset, for one).
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
}

// NearMiss is a pool whose labels an unmatched job's came close to.
type NearMiss struct {
	Pool string `json:"pool"`
	// Missing are the job's labels the pool lacks.
	Missing []string `json:"missing"`
}

// Verdict is the cause and a sentence for a person.
type Verdict struct {
	Cause  Cause  `json:"cause"`
	Detail string `json:"detail"`
}

// paceShownAfter: a registration not yet picked up this long after it was scheduled waits for
// the GitHub task queue's rate, not for a worker's next poll (which takes milliseconds).
const paceShownAfter = 2 * time.Second

// githubActivities are the runner's activities that call GitHub (the paced task queue).
var githubActivities = map[string]bool{
	workflows.ActivityRegisterRunner: true, workflows.ActivityGetRunner: true, workflows.ActivityRemoveRunner: true,
}

// decideCause says why the job waits, from the job's side outward: the job itself (started,
// never received, no pool, where its scale set has it), then its pool's mode and quota, then
// the runner it waits for, then the pool's bounds.
func decideCause(f WhyFacts) Verdict {
	if f.Running {
		d := fmt.Sprintf("running on %s", f.Runner.Status.Name)
		if ahead := warmedAhead(f); ahead != "" {
			d += "; " + ahead
		}
		return Verdict{CauseNone, d}
	}
	if f.ScaleSet != nil {
		return scaleSetCause(f)
	}
	if f.Reservation == nil {
		return jobNotHeld(f)
	}
	return poolCause(f)
}

// warmedAhead says, of a job running in a pool that prewarms, that its runner's workflow
// started before the job was queued: warmed for it from its run's graph when the pool says so
// (Prewarmed), else a runner that was there already. Empty when the runner came after, or
// the facts do not tell. The runner is the one GitHub gave the job, not necessarily the one
// started for the prediction: any idle runner of the pool that fits takes a job.
func warmedAhead(f WhyFacts) string {
	if f.Pool == nil || !f.Pool.Spec.PrewarmOn() || f.Runner == nil || f.Runner.Started.IsZero() {
		return ""
	}
	queued := f.QueuedAt
	if queued.IsZero() && f.Prewarmed != nil {
		queued = f.Prewarmed.Queued
	}
	if queued.IsZero() || !f.Runner.Started.Before(queued) {
		return ""
	}
	ahead := fmt.Sprintf("%.1f s", queued.Sub(f.Runner.Started).Seconds())
	if p := f.Prewarmed; p != nil {
		return fmt.Sprintf("started on a runner warmed %s before it was queued (predicted from run %d's graph)", ahead, p.RunID)
	}
	return fmt.Sprintf("started on a runner that started %s before it was queued, not warmed for this job (the pool holds no prediction of it)", ahead)
}

// poolCause judges a job its pool holds and no runner runs: the pool's mode and quota, then
// the runner it waits for, then the pool's bounds.
func poolCause(f WhyFacts) Verdict {
	p := f.Pool
	if p.Mode != workflows.PoolActive {
		return Verdict{CausePaused, fmt.Sprintf("pool %s is %s (%s): it starts no runner", p.Name, p.Mode, p.ModeReason)}
	}
	for _, b := range p.Blocked {
		if b.Reason == workflows.BlockQuota {
			return Verdict{CauseQuota, fmt.Sprintf("the namespace's quota is full: %d runner pod(s) refused since %s (%s)",
				b.Runners, clock(b.Since), b.Message)}
		}
	}
	if f.Runner != nil {
		if v, ok := runnerCause(f.Runner, f.Now); ok {
			return v
		}
	}
	return boundsCause(p)
}

// jobNotHeld judges a job no pool holds.
func jobNotHeld(f WhyFacts) Verdict {
	switch {
	case f.Unmatched != nil:
		d := fmt.Sprintf("no pool has all its labels %v (queued %s in %s)", f.Unmatched.Labels, clock(f.Unmatched.At), f.Unmatched.Repository)
		for _, m := range f.NearMisses {
			d += fmt.Sprintf("; pool %s lacks %v", m.Pool, m.Missing)
		}
		return Verdict{CauseNoPool, d}
	case f.Pools == 0:
		return Verdict{CauseNoPoolExists, "no pool is running"}
	case len(f.ScaleSets) == f.Pools:
		// Every pool hears its jobs from its set: there is no intake to have missed the job.
		return setsNotHolding(f.ScaleSets, f.Now)
	}
	d := "no pool holds the job and the intake recorded no unmatched delivery for it: " +
		"GitHub's delivery never reached the intake or was refused (see the webhook's recent deliveries; " +
		"the reconcile Schedule redelivers failed ones), or the job finished long ago"
	for _, p := range f.Pulled {
		d += fmt.Sprintf("; pool %s reads its demand by pull and holds no job by id (last read %s: %d queued)", p.Pool, clock(p.At), p.Queued)
	}
	for _, s := range f.ScaleSets {
		_, why := s.notHolding(f.Now)
		d += fmt.Sprintf("; pool %s hears its jobs from its scale set: %s", s.Pool, why)
	}
	return Verdict{CauseNotReceived, d}
}

// runnerCause judges the runner the job waits for; ok is false when nothing holds it back.
func runnerCause(r *RunnerFacts, now time.Time) (Verdict, bool) {
	st := r.Status
	if a := r.Activity; a != nil {
		if v, ok := activityCause(a, now); ok {
			return v, true
		}
	}
	switch {
	case st.Online:
		return Verdict{}, false
	case r.PodWaiting != "":
		return Verdict{CausePodPending, fmt.Sprintf("runner %s's pod is Pending: %s", st.Name, r.PodWaiting)}, true
	case st.PodPhase == workflows.PodPending && st.PodReason != "":
		return Verdict{CausePodPending, fmt.Sprintf("runner %s's pod is Pending since %s: %s", st.Name, clock(st.PodCreatedAt), st.PodReason)}, true
	case st.PodPhase == workflows.PodRunning:
		return Verdict{CauseNotOnline, fmt.Sprintf("runner %s's pod runs but the runner has not come online since %s", st.Name, clock(st.PodCreatedAt))}, true
	case !st.PodCreatedAt.IsZero():
		hint := "its pod gives no reason"
		if !r.PodRead {
			hint = "pass --kubeconfig to read the pod's own reason"
		}
		return Verdict{CauseNotOnline, fmt.Sprintf("runner %s has not come online since its pod was created at %s (%s)", st.Name, clock(st.PodCreatedAt), hint)}, true
	}
	return Verdict{CauseStarting, fmt.Sprintf("runner %s is %s (started %s)", st.Name, st.State, clock(r.Started))}, true
}

// activityCause judges a runner's pending activity: GitHub's budget or pace, the quota, or a
// cluster that does not answer.
func activityCause(a *PendingActivity, now time.Time) (Verdict, bool) {
	switch {
	case a.FailureType == workflows.ErrRateLimited && !strings.Contains(a.Failure, "secondary"):
		// Refused at the reserve (BudgetReserveError) or by GitHub's primary limit: the hour's budget.
		return Verdict{CauseBudget, fmt.Sprintf("GitHub's hourly budget is at its reserve until %s (%s waits)", clock(a.NextAttempt), a.Type)}, true
	case a.FailureType == workflows.ErrRateLimited && githubActivities[a.Type]:
		return Verdict{CausePace, fmt.Sprintf("GitHub refused %s for its rate limit; next try %s", a.Type, clock(a.NextAttempt))}, true
	case !a.Started && a.Attempt <= 1 && a.Type == workflows.ActivityRegisterRunner && now.Sub(a.Scheduled) >= paceShownAfter:
		return Verdict{CausePace, fmt.Sprintf("%s waits for GitHub's per-minute pace (the GitHub task queue's rate) since %s", a.Type, clock(a.Scheduled))}, true
	case a.FailureType == workflows.ErrQuotaExceeded:
		return Verdict{CauseQuota, fmt.Sprintf("the namespace's quota is full: %s", a.Failure)}, true
	case a.Failure != "" && unreachable(a.Failure):
		return Verdict{CauseUnreachable, fmt.Sprintf("the cluster (or GitHub) does not answer %s (attempt %d): %s", a.Type, a.Attempt, a.Failure)}, true
	case !a.Started && !githubActivities[a.Type] && a.Attempt > 1:
		return Verdict{CauseUnreachable, fmt.Sprintf("%s waits for a worker serving its cluster (attempt %d)", a.Type, a.Attempt)}, true
	}
	return Verdict{}, false
}

// unreachable reports whether a Kubernetes activity's failure says the API server did not
// answer (as opposed to answering with a refusal).
func unreachable(msg string) bool {
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "dial tcp", "deadline exceeded", "timeout", "EOF", "unreachable"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// boundsCause judges a pool whose runners are all up: at its maximum, held by an override, or
// waiting for GitHub to hand an idle runner the job.
func boundsCause(p *workflows.PoolStatus) Verdict {
	live := len(p.Runners)
	idle := p.RunnersByState[workflows.RunnerIdle]
	specMax := 0
	if p.Spec.MaxReplicas != nil {
		specMax = *p.Spec.MaxReplicas
	}
	switch {
	case idle > 0:
		return Verdict{CauseUnassigned, fmt.Sprintf("pool %s has %d idle runner(s): GitHub has not handed the job to one yet", p.Name, idle)}
	case live >= p.Bounds.Max && p.OverrideActive && p.Bounds.Max < specMax:
		return Verdict{CauseOverride, fmt.Sprintf("a scheduled override holds pool %s at max %d (spec %d); all %d runner(s) are busy", p.Name, p.Bounds.Max, specMax, live)}
	case live >= p.Bounds.Max:
		return Verdict{CauseAtMax, fmt.Sprintf("pool %s is at its maximum (%d runners, all busy or starting)", p.Name, p.Bounds.Max)}
	}
	return Verdict{CauseScaling, fmt.Sprintf("pool %s has not started a runner for it yet: %s", p.Name, p.Why)}
}

// clock is a time for a person: HH:MM:SS UTC, or "-" when unknown.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05Z")
}
