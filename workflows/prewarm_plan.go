package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A prewarming pool's bookkeeping, pure: what it remembers of the runs it hears of
// (ObservePrewarm, PrewarmGraphRead), and how many runners it warms for their predicted jobs
// (PlanPrewarm). The pool's side, which reads the graphs and hands the count to Decide, is
// pool_prewarm.go; what the pool learns from the runs (run times, its start latency) is
// prewarm_learn.go, and how what it keeps is bounded, prewarm_bounds.go.

// ObservePrewarm records a batch's job events: a run not heard of before joins (its graph is
// then read once, RunsToRead), each job's times and conclusion are kept, a successful job's
// run time is recorded once the run's graph names its job, and runs heard of too long ago or
// beyond PrewarmRunsKept are forgotten. Events without the run's facts (from intakes before
// them) are left out. The state given is not modified.
func ObservePrewarm(st PrewarmState, events []WorkflowJobEvent, now time.Time) PrewarmState {
	st = st.clone()
	for _, ev := range events {
		if ev.RunID <= 0 || ev.JobID <= 0 || ev.Repository == "" || ev.HeadSHA == "" {
			continue
		}
		i := st.findRun(ev.Repository, ev.RunID)
		if i < 0 {
			st.Runs = append(st.Runs, PrewarmRun{Repository: ev.Repository, RunID: ev.RunID, HeadSHA: ev.HeadSHA})
			i = len(st.Runs) - 1
		}
		st.Runs[i].hear(ev, now)
	}
	st.recordDurations()
	return st.forget(now)
}

// PrewarmGraphRead records the answer to a run's graph read: the graph, or why there is none
// (failure, when the read failed, says how). The run's jobs that completed before it are
// recorded then. A graph of more than PrewarmGraphJobsMax jobs is not kept, and one kept
// only as boundRunGraph leaves it, if at all: the state carries it across continue-as-new.
func PrewarmGraphRead(st PrewarmState, repo string, runID int64, res ReadRunGraphResult, failure string) PrewarmState {
	st = st.clone()
	i := st.findRun(repo, runID)
	if i < 0 {
		return st // forgotten while it was read
	}
	run := &st.Runs[i]
	if failure == "" && res.NoGraph != RunGraphNotFound {
		st.rememberPath(*run, res.Path)
	}
	switch {
	case failure != "":
		run.NoGraph, _ = capText("read failed: "+failure, PrewarmSeenNameMax, "…")
	case res.Graph == nil:
		run.NoGraph = cmp.Or(res.NoGraph, RunGraphNotFound)
	case len(res.Graph.Jobs) > PrewarmGraphJobsMax:
		run.NoGraph = PrewarmTooManyJobs
	default:
		if g, ok := boundRunGraph(*res.Graph); ok {
			run.Graph = &g
		} else {
			run.NoGraph = PrewarmGraphTooLarge
		}
	}
	st.recordDurations()
	return st
}

// RunsToRead are the runs whose graph is neither read nor known to be missing.
func RunsToRead(st PrewarmState) []PrewarmRun {
	var out []PrewarmRun
	for _, r := range st.Runs {
		if r.Graph == nil && r.NoGraph == "" {
			out = append(out, r)
		}
	}
	return out
}

// PrewarmPlanInput is everything PlanPrewarm depends on.
type PrewarmPlanInput struct {
	State PrewarmState
	Now   time.Time
	// PoolLabels are the pool's labels: it predicts the jobs its runners can run.
	PoolLabels []string
	// Taken are the jobs the pool's runners run, and since when: a job's start when its own
	// events did not tell it (an in_progress event on the pool's own runner goes to the
	// runner, not through the scale window). A taken job the pool has heard no event of is
	// most likely a predicted job whose warmed runner took it before its queued event came
	// through the scale window: Decide counts it already (busy elsewhere), so it is taken
	// off the predicted runners rather than counted twice.
	Taken []TakenJob
	// StartLatency is how long a runner takes to be ready; Grace how long warmed runners
	// wait past the job's predicted queue time.
	StartLatency time.Duration
	Grace        time.Duration
}

// TakenJob is a job one of the pool's runners took, and when.
type TakenJob struct {
	JobID int64
	At    time.Time
	// Elsewhere: Decide counts its runner as busy elsewhere (no reservation of the pool holds
	// the job, its runner neither done with it nor ended). A job its reservation counts is
	// not counted twice, whether the pool follows its run or not.
	Elsewhere bool
}

// PrewarmPlan is how many runners the pool keeps warm for predicted jobs now.
type PrewarmPlan struct {
	// State is the memory after the plan: jobs warmed for, what became of them, runs
	// finished forgotten.
	State PrewarmState
	// Want is the runners warmed for jobs not queued yet; Decide adds them to the pool's
	// demand, after its queued jobs and within its max.
	Want int
	// Released is the runners of predictions that failed with this plan (skipped or
	// missed): the pool lets them go.
	Released int
	// WakeAt is when the plan next changes without any event: a job's runners are due to
	// start, or its grace ends.
	WakeAt time.Time
	// Why names the jobs warmed for, for the status: "build of acme/app run 77 (due
	// 10:04:30)".
	Why string
}

// PlanPrewarm predicts each followed run's jobs (Predict) and keeps the pool's runners warm
// for them:
//   - a job predicted to be queued at Q gets its runners from Q minus StartLatency on; the
//     pool then remembers Q (at least now) as when the job is due;
//   - a job warmed for that GitHub queued is over: its runners are the job's now, counted by
//     its reservation (one runner per job);
//   - a job warmed for that is predicted skipped (a job it needs failed), or that is not
//     queued by its due time plus Grace, is over too, and its runners are released;
//   - a run none of whose heard jobs still runs and with nothing left to warm for is
//     forgotten (its run times are kept), as is one not heard of for PrewarmRunIdleForget.
func PlanPrewarm(in PrewarmPlanInput) PrewarmPlan {
	st := in.State.clone().forget(in.Now)
	plan := PrewarmPlan{}
	var why []string
	kept := st.Runs[:0]
	for _, run := range st.Runs {
		if run.Graph == nil {
			kept = append(kept, run)
			continue
		}
		preds := Predict(PredictInput{
			Graph: *run.Graph, Observed: run.observed(in.Taken), History: st.history(run),
			PoolLabels: in.PoolLabels, Now: in.Now,
		})
		w := warmRun(&run, preds, in, &st.Counts)
		plan.Want += w.want
		plan.Released += w.released
		plan.WakeAt = soonest(plan.WakeAt, w.wake)
		why = append(why, w.why...)
		if !w.finished {
			kept = append(kept, run)
		}
	}
	st.Runs = kept
	plan.State = st
	plan.Why = strings.Join(why, ", ")
	if unheard := unheardJobs(plan.State, in.Taken); unheard > 0 && plan.Want > 0 {
		plan.Want = max(plan.Want-unheard, 0)
		plan.Why += fmt.Sprintf("; less %d runner(s) running a job not heard of yet", unheard)
	}
	return plan
}

// unheardJobs counts the taken jobs Decide counts as busy elsewhere that no run the plan
// still follows holds (see PrewarmPlanInput.Taken).
func unheardJobs(st PrewarmState, taken []TakenJob) int {
	n := 0
	for _, t := range taken {
		if !t.Elsewhere {
			continue
		}
		heard := slices.ContainsFunc(st.Runs, func(r PrewarmRun) bool {
			return slices.ContainsFunc(r.Jobs, func(j PrewarmJobSeen) bool { return j.ID == t.JobID })
		})
		if !heard {
			n++
		}
	}
	return n
}

// runWarmth is what one run contributes to a plan.
type runWarmth struct {
	want, released int
	wake           time.Time
	why            []string
	finished       bool
}

// warmRun applies the run's predictions to what the pool warmed for it (see PlanPrewarm),
// counting each job's warming as it begins and ends.
func warmRun(run *PrewarmRun, preds []JobPrediction, in PrewarmPlanInput, counts *PrewarmCounts) runWarmth {
	var w runWarmth
	byID := map[string]JobPrediction{} // lookup only
	pending := false
	for _, pr := range preds {
		byID[jobKey(pr.JobID)] = pr
		pending = pending || pr.Kind == PredictedQueued || pr.Kind == NotPredicted
	}
	for i := range run.Warmed {
		h := &run.Warmed[i]
		if h.Over != "" {
			continue
		}
		pr, predicted := byID[jobKey(h.JobID)]
		switch {
		case !predicted && run.endedUnstarted(h.JobID):
			// GitHub skipped or cancelled it: its event came before, or with, the failure
			// Predict would have read it from.
			h.Over, w.released = WarmSkipped, w.released+h.Runners
		case !predicted && run.someInstancesHeard(*h) && in.Now.Before(h.ReadyBy.Add(in.Grace)):
			// GitHub queued the job, so Predict leaves it out; but a matrix's instances are
			// queued by events of their own, which may come in later batches: the runners of
			// the instances not heard of yet stay warm for them (else the pool drains them and
			// starts new ones when those come), until the grace ends.
			w.warm(*run, *h, h.Runners-run.instancesHeard(*h), in.Grace)
		case !predicted:
			h.Over = WarmTaken // Predict leaves out the jobs GitHub queued
		case pr.Kind == PredictedSkipped:
			h.Over, w.released = WarmSkipped, w.released+h.Runners
		case !in.Now.Before(h.ReadyBy.Add(in.Grace)):
			h.Over, w.released = WarmMissed, w.released+h.Runners
		default:
			w.warm(*run, *h, h.Runners, in.Grace)
		}
		counts.ended(*h, in.Now)
	}
	for _, pr := range preds {
		if pr.Kind != PredictedQueued || slices.ContainsFunc(run.Warmed, func(h PrewarmWarmed) bool { return strings.EqualFold(h.JobID, pr.JobID) }) {
			continue
		}
		if at := pr.QueuedAt.Add(-in.StartLatency); in.Now.Before(at) {
			w.wake = soonest(w.wake, at)
			continue
		}
		h := PrewarmWarmed{JobID: pr.JobID, Runners: pr.Runners, ReadyBy: latest(pr.QueuedAt, in.Now), At: in.Now}
		run.Warmed = append(run.Warmed, h)
		counts.began(h)
		w.warm(*run, h, h.Runners, in.Grace)
	}
	w.finished = !pending && w.want == 0 && !slices.ContainsFunc(run.Jobs, func(j PrewarmJobSeen) bool { return j.Completed.IsZero() })
	return w
}

// someInstancesHeard reports whether some of h's job's instances, not all, were heard of.
func (r PrewarmRun) someInstancesHeard(h PrewarmWarmed) bool {
	n := r.instancesHeard(h)
	return n > 0 && n < h.Runners
}

// instancesHeard counts the jobs of the run heard of that are instances of h's job (a job
// without a matrix has one).
func (r PrewarmRun) instancesHeard(h PrewarmWarmed) int {
	n := 0
	for _, j := range r.Jobs {
		if id, ok := graphJobOf(*r.Graph, j.Name); ok && strings.EqualFold(id, h.JobID) {
			n++
		}
	}
	return n
}

// endedUnstarted reports whether the file's job was heard of only as completed skipped (a
// need failed, its if: was false) or cancelled. GitHub sets a skipped job's started_at to
// its completed_at, so its conclusion, not its start, tells.
func (r PrewarmRun) endedUnstarted(jobID string) bool {
	found := false
	for _, j := range r.Jobs {
		if id, ok := graphJobOf(*r.Graph, j.Name); !ok || !strings.EqualFold(id, jobID) {
			continue
		}
		if j.Completed.IsZero() || (j.Conclusion != "skipped" && j.Conclusion != "cancelled") {
			return false
		}
		found = true
	}
	return found
}

// warm counts one job's warmed runners.
func (w *runWarmth) warm(run PrewarmRun, h PrewarmWarmed, runners int, grace time.Duration) {
	w.want += runners
	w.wake = soonest(w.wake, h.ReadyBy.Add(grace))
	w.why = append(w.why, fmt.Sprintf("%s of %s run %d (due %s)", h.JobID, run.Repository, run.RunID, clock(h.ReadyBy)))
}

// graphJobOf is the file's job id of a GitHub job name: the job whose name (its id when it
// has none) is the name, or, for a matrix instance, the name's part before " (<values>)". A
// name that no job, or more than one, could have (a name with an expression, a reusable
// workflow's "caller / callee") maps to none: the pool predicts nothing from that job.
func graphJobOf(g RunGraph, name string) (string, bool) {
	var exact, instance []string
	for _, j := range g.Jobs {
		if j.NameUnknown {
			continue
		}
		n := cmp.Or(j.Name, j.ID)
		switch {
		case name == n:
			exact = append(exact, j.ID)
		case strings.HasPrefix(name, n+" (") && strings.HasSuffix(name, ")"):
			instance = append(instance, j.ID)
		}
	}
	switch {
	case len(exact) == 1:
		return exact[0], true
	case len(exact) == 0 && len(instance) == 1:
		return instance[0], true
	}
	return "", false
}

// observed is what Predict reads of the run's jobs: each heard job mapped to the file's id
// (jobs that map to none are left out), its start taken from the pool's runner when its
// events did not tell it.
func (r PrewarmRun) observed(taken []TakenJob) []ObservedJob {
	var out []ObservedJob
	for _, j := range r.Jobs {
		id, ok := graphJobOf(*r.Graph, j.Name)
		if !ok {
			continue
		}
		started := j.Started
		if i := slices.IndexFunc(taken, func(t TakenJob) bool { return t.JobID == j.ID }); started.IsZero() && i >= 0 {
			started = taken[i].At
		}
		out = append(out, ObservedJob{JobID: id, Queued: j.Queued, Started: started, Completed: j.Completed, Conclusion: j.Conclusion})
	}
	return out
}

// hear applies one event to the run.
func (r *PrewarmRun) hear(ev WorkflowJobEvent, now time.Time) {
	r.Heard = now
	if r.Workflow == "" {
		r.Workflow, _ = capText(ev.WorkflowName, PrewarmSeenNameMax, "…")
	}
	i := slices.IndexFunc(r.Jobs, func(j PrewarmJobSeen) bool { return j.ID == ev.JobID })
	if i < 0 {
		if len(r.Jobs) >= PrewarmRunJobsKept {
			return
		}
		r.Jobs = append(r.Jobs, PrewarmJobSeen{ID: ev.JobID})
		i = len(r.Jobs) - 1
	}
	j := &r.Jobs[i]
	if j.Name == "" {
		j.Name = seenName(ev.JobName)
	}
	at := ev.At
	if at.IsZero() {
		at = now
	}
	switch ev.Action {
	case JobQueued:
		if j.Queued.IsZero() {
			j.Queued = at
		}
	case JobInProgress:
		j.Started = firstSet(j.Started, ev.StartedAt, at)
	case JobCompleted:
		j.Started = firstSet(j.Started, ev.StartedAt)
		j.Completed = firstSet(ev.CompletedAt, at)
		j.Conclusion = ev.Conclusion
	}
}

// firstSet is the first of the times that is set; zero when none is.
func firstSet(times ...time.Time) time.Time {
	for _, t := range times {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// workflowKey names a run's workflow in the durations: its repository and name.
func (r PrewarmRun) workflowKey() string { return r.Repository + " " + r.Workflow }

// forget drops the runs not heard of for PrewarmRunIdleForget, then the least recently heard
// beyond PrewarmRunsKept; runners still warm for them are counted wasted (WarmForgotten).
// The state's runs must be its own (clone).
func (st PrewarmState) forget(now time.Time) PrewarmState {
	st.Runs = slices.DeleteFunc(st.Runs, func(r PrewarmRun) bool {
		idle := !now.Before(r.Heard.Add(PrewarmRunIdleForget))
		if idle {
			st.Counts.forgot(r, now)
		}
		return idle
	})
	for len(st.Runs) > PrewarmRunsKept {
		oldest := 0
		for k, r := range st.Runs {
			if r.Heard.Before(st.Runs[oldest].Heard) {
				oldest = k
			}
		}
		st.Counts.forgot(st.Runs[oldest], now)
		st.Runs = slices.Delete(st.Runs, oldest, oldest+1)
	}
	return st
}

func (st PrewarmState) findRun(repo string, runID int64) int {
	return slices.IndexFunc(st.Runs, func(r PrewarmRun) bool { return r.RunID == runID && strings.EqualFold(r.Repository, repo) })
}

// clone copies the state deep enough that changing the copy's runs, jobs and run times
// leaves the original as it was (graphs are never changed, only replaced).
func (st PrewarmState) clone() PrewarmState {
	out := st
	out.Runs = slices.Clone(st.Runs)
	for i := range out.Runs {
		out.Runs[i].Jobs = slices.Clone(out.Runs[i].Jobs)
		out.Runs[i].Warmed = slices.Clone(out.Runs[i].Warmed)
	}
	out.Paths = slices.Clone(st.Paths)
	out.Counts = st.Counts.clone()
	out.Durations = slices.Clone(st.Durations)
	for i := range out.Durations {
		out.Durations[i].Jobs = slices.Clone(out.Durations[i].Jobs)
	}
	return out
}
