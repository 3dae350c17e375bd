package workflows

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Predict says, for each job of a workflow run that waits for other jobs (has needs), has not
// been queued yet and that this pool's runners can run, when GitHub will queue it and how many
// runners it will need, so the pool can have them ready (issue 39). It is a pure function of
// its input, to be called from the pool workflow: no clock (Now is given), no map order in its
// answer (sorted by job id), nothing random.
//
// A job is queued when the last job it needs finishes. A needed job that completed (every
// instance of its matrix) finished at its last completion. One that did not finishes at its
// start plus the policy's quantile of its recent run times, and never before Now (a job
// running past its prediction is due any moment), where its start is:
//   - when every instance started, the last instance's start;
//   - when queued and not every instance started, Now: it starts when a runner takes it;
//   - when not queued yet, its own predicted queue time, found the same way down a chain
//     (lint → build → deploy).
//
// The answer for a job, checked in this order:
//   - NotPredicted when its labels are known only in the run (it may not be this pool's), its
//     events cannot be mapped back to it (untoldJobs: it would never be seen queued), or
//     it has an if: (GitHub evaluates it only when its needs finish, and one such as always()
//     runs the job even after a failure);
//   - PredictedSkipped when a needed job failed, was cancelled or skipped, or will be skipped
//     for the same reason further up: GitHub skips a job whose needs did not all succeed, so
//     runners warmed for it can go. A failure decides even when other needs cannot be told;
//   - NotPredicted when a needed job's events cannot be mapped back to it, or one not
//     completed has fewer than MinSamples recent run
//     times, a matrix whose size is known only in the run, or an if: and is not queued (it may
//     be skipped); or when the job's own matrix size is known only in the run;
//   - else PredictedQueued, with its matrix's instance count as the runners it needs.
//
// A job whose labels are all known and that LabelsFit does not give to this pool is left out:
// another pool predicts it. Jobs without needs are left out too: GitHub queues them with the
// run, before any prediction could help.
func Predict(in PredictInput) []JobPrediction {
	p := newPredictor(in)
	var out []JobPrediction
	for _, j := range in.Graph.Jobs {
		if len(j.Needs) == 0 || p.observed[jobKey(j.ID)].seen > 0 {
			continue
		}
		if j.LabelsKnown && !LabelsFit(in.PoolLabels, j.Labels) {
			continue
		}
		out = append(out, p.predictJob(j))
	}
	slices.SortFunc(out, func(a, b JobPrediction) int { return cmp.Compare(a.JobID, b.JobID) })
	return out
}

// predictJob is the prediction for one job not yet queued that may route to the pool.
func (p *predictor) predictJob(j RunGraphJob) JobPrediction {
	pr := JobPrediction{JobID: j.ID, Kind: NotPredicted}
	switch {
	case j.LabelsCut:
		pr.Why = "its runs-on labels are more, or longer, than a pool keeps"
		return pr
	case !j.LabelsKnown:
		pr.Why = "its runs-on labels are known only in the run"
		return pr
	case p.untold[jobKey(j.ID)] != "":
		// Its queued event would never be seen as its: runners warmed for it would be
		// counted beside its reservation until the grace ran out.
		pr.Why = p.untold[jobKey(j.ID)]
		return pr
	case j.If != "":
		pr.Why = fmt.Sprintf("it has an if: (%s), evaluated only when its needs finish", j.If)
		return pr
	}
	q := p.queuedAt(j)
	pr.After, pr.Why = q.after, q.why
	switch {
	case q.kind == outlookFails:
		pr.Kind = PredictedSkipped
	case q.kind == outlookUnknown:
	case j.Instances <= 0:
		pr.After, pr.Why = "", "its matrix size is known only in the run"
	default:
		pr.Kind, pr.QueuedAt, pr.Runners = PredictedQueued, q.at, j.Instances
	}
	return pr
}

// outlookKind is what is known of when a job finishes or is queued.
type outlookKind int

const (
	// outlookAt: it happens at the outlook's instant.
	outlookAt outlookKind = iota
	// outlookFails: the job did not, or will not, succeed; its dependents are skipped.
	outlookFails
	// outlookUnknown: it cannot be told yet.
	outlookUnknown
)

// outlook is when a job finishes (or is queued), which needed job decides it, and why.
type outlook struct {
	kind  outlookKind
	at    time.Time
	after string
	why   string
}

// observation is what the pool has seen of one job's instances.
type observation struct {
	seen, started, completed int
	lastStarted              time.Time
	lastCompleted            time.Time
	// failed is the first instance's conclusion other than success, empty while none.
	failed string
}

// predictor evaluates one run. Finishes are memoized: a job many others need is evaluated
// once.
type predictor struct {
	now      time.Time
	policy   PredictPolicy
	jobs     map[string]RunGraphJob
	observed map[string]observation
	history  map[string][]time.Duration
	finishes map[string]outlook
	// untold says, for each job whose GitHub events cannot be mapped back to it
	// (untoldJobs), why.
	untold map[string]string
	// evaluating guards against a cycle of needs, which GitHub and the parser refuse but a
	// graph built by hand could hold.
	evaluating map[string]bool
}

// jobKey is a job id as the predictor compares it: GitHub compares ids case-insensitively.
func jobKey(id string) string { return strings.ToLower(id) }

func newPredictor(in PredictInput) *predictor {
	p := &predictor{
		now:        in.Now,
		policy:     in.Policy.withDefaults(),
		jobs:       map[string]RunGraphJob{},
		observed:   map[string]observation{},
		history:    map[string][]time.Duration{},
		finishes:   map[string]outlook{},
		untold:     untoldJobs(in.Graph),
		evaluating: map[string]bool{},
	}
	for _, j := range in.Graph.Jobs {
		p.jobs[jobKey(j.ID)] = j
	}
	for _, o := range in.Observed {
		p.observed[jobKey(o.JobID)] = p.observed[jobKey(o.JobID)].add(o)
	}
	for _, h := range in.History {
		p.history[jobKey(h.JobID)] = append(p.history[jobKey(h.JobID)], h.Durations...)
	}
	return p
}

// add counts one reported instance of the job.
func (ob observation) add(o ObservedJob) observation {
	if o.Queued.IsZero() && o.Started.IsZero() && o.Completed.IsZero() {
		return ob
	}
	ob.seen++
	if !o.Started.IsZero() {
		ob.started++
		ob.lastStarted = latest(ob.lastStarted, o.Started)
	}
	if !o.Completed.IsZero() {
		ob.completed++
		ob.lastCompleted = latest(ob.lastCompleted, o.Completed)
		if o.Conclusion != "success" && ob.failed == "" {
			ob.failed = cmp.Or(o.Conclusion, "no conclusion")
		}
	}
	return ob
}

// untoldJobs are the jobs of the graph whose GitHub events cannot be mapped back to them
// unambiguously (graphJobOf), each with why: a name with an expression (or too long to
// keep), or a name that another job's events could also carry: the same name, or one that
// is the other's name with " (<values>)" after it, as a matrix instance's is. Such a job is
// never seen queued, started or completed, so the pool predicts nothing for it, nor from it.
func untoldJobs(g RunGraph) map[string]string {
	out := map[string]string{}
	for i, j := range g.Jobs {
		n := cmp.Or(j.Name, j.ID)
		if j.NameUnknown {
			out[jobKey(j.ID)] = fmt.Sprintf("its name %q is known only in the run, or too long to keep: its events cannot be told to be its", n)
			continue
		}
		for k, o := range g.Jobs {
			if k == i || o.NameUnknown {
				continue
			}
			if m := cmp.Or(o.Name, o.ID); m == n || nameNests(m, n) || nameNests(n, m) {
				out[jobKey(j.ID)] = fmt.Sprintf("its name %q is too like %s's %q: its events cannot be told apart", n, o.ID, m)
				break
			}
		}
	}
	return out
}

// nameNests reports whether name could be a matrix instance's of the job named job:
// "<job> (<values>)".
func nameNests(name, job string) bool {
	return strings.HasPrefix(name, job+" (") && strings.HasSuffix(name, ")")
}

// withDefaults fills the zero fields from PrewarmPredictPolicy.
func (pol PredictPolicy) withDefaults() PredictPolicy {
	if pol.Quantile <= 0 || pol.Quantile > 1 {
		pol.Quantile = PrewarmPredictPolicy.Quantile
	}
	pol.MinSamples = cmp.Or(max(pol.MinSamples, 0), PrewarmPredictPolicy.MinSamples)
	pol.Kept = cmp.Or(max(pol.Kept, 0), PrewarmPredictPolicy.Kept)
	return pol
}

// queuedAt is when job j will be queued: when the last job it needs finishes. A needed job
// that fails decides whatever the others do (j is skipped); otherwise one that cannot be
// told makes j's queueing unknown. Of needed jobs finishing at the same instant (two both
// running past their prediction are both due now) the first in needs is named.
func (p *predictor) queuedAt(j RunGraphJob) outlook {
	if len(j.Needs) == 0 {
		return outlook{at: p.now, why: "it needs no job: GitHub queues it with the run"}
	}
	var last, unknown *outlook
	for _, need := range j.Needs {
		f := p.finish(need)
		f.after = need
		switch {
		case f.kind == outlookFails:
			return f
		case f.kind == outlookUnknown:
			if unknown == nil {
				unknown = &f
			}
		case last == nil || f.at.After(last.at):
			last = &f
		}
	}
	if unknown != nil {
		return *unknown
	}
	return *last
}

// finish is when the job of the given id finishes successfully, or that it will not.
func (p *predictor) finish(id string) outlook {
	key := jobKey(id)
	if f, ok := p.finishes[key]; ok {
		return f
	}
	if p.evaluating[key] {
		return outlook{kind: outlookUnknown, why: fmt.Sprintf("the needs of %s form a cycle", id)}
	}
	p.evaluating[key] = true
	f := p.evaluateFinish(id)
	delete(p.evaluating, key)
	p.finishes[key] = f
	return f
}

func (p *predictor) evaluateFinish(id string) outlook {
	key := jobKey(id)
	j, ok := p.jobs[key]
	if !ok {
		return outlook{kind: outlookUnknown, why: fmt.Sprintf("%s is not a job of the file", id)}
	}
	ob := p.observed[key]
	switch {
	case p.untold[key] != "":
		// Its completion, or its failure, would never be seen.
		return outlook{kind: outlookUnknown, why: fmt.Sprintf("%s: %s", id, p.untold[key])}
	case ob.failed != "":
		return outlook{kind: outlookFails, why: fmt.Sprintf("%s concluded %s", id, ob.failed)}
	case j.Instances > 0 && ob.completed >= j.Instances:
		return outlook{at: ob.lastCompleted, why: fmt.Sprintf("%s completed at %s", id, clock(ob.lastCompleted))}
	case j.Instances <= 0:
		return outlook{kind: outlookUnknown, why: fmt.Sprintf("%s's matrix size is known only in the run", id)}
	}
	start := p.start(j, ob)
	if start.kind != outlookAt {
		return start
	}
	took, samples := durationQuantile(p.history[key], p.policy)
	if samples < p.policy.MinSamples {
		return outlook{kind: outlookUnknown, why: fmt.Sprintf("%s has %d recent run times, a prediction needs %d", id, samples, p.policy.MinSamples)}
	}
	return outlook{
		at:  latest(start.at.Add(took), p.now),
		why: fmt.Sprintf("%s %s, p%g of its last %d runs %s", id, start.why, math.Round(p.policy.Quantile*1000)/10, samples, took),
	}
}

// start is when job j starts, or started (its last instance): what its run time counts from.
// When known, why completes a sentence whose subject is the job.
func (p *predictor) start(j RunGraphJob, ob observation) outlook {
	switch {
	case ob.started >= j.Instances:
		return outlook{at: ob.lastStarted, why: "started at " + clock(ob.lastStarted)}
	case ob.seen > 0:
		return outlook{at: p.now, why: "is queued, not yet started"}
	case j.If != "":
		return outlook{kind: outlookUnknown, why: fmt.Sprintf("%s has an if: and is not queued: it may be skipped", j.ID)}
	}
	q := p.queuedAt(j)
	switch q.kind {
	case outlookFails:
		return outlook{kind: outlookFails, why: fmt.Sprintf("%s will be skipped: %s", j.ID, q.why)}
	case outlookUnknown:
		return q
	}
	at := latest(q.at, p.now)
	return outlook{at: at, why: "would start at " + clock(at)}
}

// durationQuantile is the policy's quantile of the newest Kept run times, by nearest rank
// (the shortest run time at least that share of the runs took no longer than), and how many
// run times it was taken from. Nearest rank answers a run time that happened, never an
// interpolation between two.
func durationQuantile(durations []time.Duration, pol PredictPolicy) (time.Duration, int) {
	recent := slices.Clone(durations[max(len(durations)-pol.Kept, 0):])
	if len(recent) == 0 {
		return 0, 0
	}
	slices.Sort(recent)
	// The small epsilon keeps a product like 0.9 × 10 from rounding up past a whole rank.
	rank := int(math.Ceil(pol.Quantile*float64(len(recent)) - 1e-9))
	return recent[min(max(rank, 1), len(recent))-1], len(recent)
}

// RecordJobDuration adds one run time of a job to the history, keeping its newest kept; the
// history given is not modified. Callers record the run times of successful runs only: a
// failed or cancelled run ends early and says little of how long the job takes.
func RecordJobDuration(history []JobDurations, jobID string, took time.Duration, kept int) []JobDurations {
	out := slices.Clone(history)
	i := slices.IndexFunc(out, func(h JobDurations) bool { return strings.EqualFold(h.JobID, jobID) })
	if i < 0 {
		out, i = append(out, JobDurations{JobID: jobID}), len(out)
	}
	durations := append(slices.Clone(out[i].Durations), took)
	out[i].Durations = durations[max(len(durations)-max(kept, 1), 0):]
	return out
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// clock writes an instant for a Why: UTC, to the second.
func clock(t time.Time) string { return t.UTC().Format("15:04:05") }
