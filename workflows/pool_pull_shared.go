package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// changeSharedPull gates the pull's reads moving to the repositories' shared pull workflows
// (RepoPullWorkflow): the pool no longer reads its repositories itself every interval, it
// tells each repository's workflow what it wants (DemandRepoPull, when that changes) and
// applies the parts those workflows signal it (SignalRepoPull), which come only when they
// changed. An answer older than PullAnswerMaxAge (or a repository not heard of for
// PullShareSilenceMax) is not counted on: the pool scales on its reservations for it and says
// so. Asked only by a pool with a QueuedAndInProgressJobs pull; a run that began reading by
// itself keeps doing so until it continues as new.
const changeSharedPull = "shared-pull"

// askSharedPull is changeSharedPull's one GetVersion call, for its gate.
func askSharedPull(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeSharedPull, workflow.DefaultVersion, 1)
}

// sharesPull reports whether this run reads its repositories through the shared workflows.
func (p *pullDemand) sharesPull() bool {
	if p.st.Spec.Pull == nil || p.st.Spec.Pull.Metric != PullMetricQueuedJobs {
		return false
	}
	return p.shared.inForce(p.ctx)
}

// onRepoPull keeps a repository's part in place of its last one and applies what it says about
// running and ended jobs (as the pool's own read did). A part of a repository the pool no
// longer reads is ignored.
func (p *pullDemand) onRepoPull(s RepoPullSignal) {
	st := p.st.Pull
	if st == nil || !st.Shared || p.st.Spec.Pull == nil {
		return
	}
	repos := p.pullRepos()
	at := slices.IndexFunc(repos, func(r string) bool { return strings.EqualFold(r, s.Repo.Repository) })
	if at < 0 {
		return
	}
	now := workflow.Now(p.ctx)
	cur := s.Repo
	cur.At, cur.Heard, cur.Stale = s.At, now, s.Stale
	i := slices.IndexFunc(st.Repos, func(r PulledRepo) bool { return strings.EqualFold(r.Repository, cur.Repository) })
	var prev []PulledRepo
	if i >= 0 {
		prev = []PulledRepo{st.Repos[i]}
		st.Repos[i] = cur
	} else {
		st.Repos = append(st.Repos, cur)
	}
	if s.At.After(st.At) {
		st.At = s.At
	}
	if cur.Stale != "" {
		return
	}
	st.Error = ""
	p.applyPulledJobs([]PulledRepo{cur})
	if len(prev) == 1 && prev[0].Stale == "" {
		p.endJobsGone(prev, []PulledRepo{cur})
	}
}

// tendSharedPull asks each repository's pull workflow for the pool's part when what the pool
// wants changed (a new repository, interval or labels), again when a repository has been
// silent for PullShareSilenceMax (its workflow may be gone), and withdraws from the
// repositories it no longer reads. One batch of demands at a time, beside the loop.
func (p *pullDemand) tendSharedPull(now time.Time) {
	if p.reading {
		return
	}
	sends := p.pullDemands(now)
	if len(sends) == 0 {
		return
	}
	p.reading = true // continue-as-new waits for the demands
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.reading, p.changed = false, true }()
		futures := make([]workflow.Future, len(sends))
		for i, in := range sends {
			futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ListingDemandPolicy), ActivityDemandRepoPull, in)
		}
		for i, f := range futures {
			if err := f.Get(ctx, nil); err != nil {
				p.logger.Warn("Pull demand failed", "repository", sends[i].Repository, "error", err)
				continue
			}
			p.recordDemanded(sends[i], workflow.Now(ctx))
		}
	})
}

// pullDemands are the demands to send at now (PullDemandsToSend on the pool's state).
func (p *pullDemand) pullDemands(now time.Time) []DemandRepoPullInput {
	var want []string
	interval := time.Duration(0)
	if p.st.Spec.Pull != nil && p.st.Spec.Pull.Metric == PullMetricQueuedJobs {
		want, interval = p.pullRepos(), p.st.Spec.Pull.IntervalOrDefault()
	}
	return PullDemandsToSend(PullDemandsInput{
		Pool: p.st.Spec.Name, Labels: p.st.Spec.Labels, Repos: want, Interval: interval,
		Demanded: p.st.Pull.Demanded, Answers: p.st.Pull.Repos, Now: now,
	})
}

// recordDemanded keeps what the pool asked of a repository (a withdrawal removes it).
func (p *pullDemand) recordDemanded(in DemandRepoPullInput, at time.Time) {
	st := p.st.Pull
	if st == nil {
		return
	}
	st.Demanded = slices.DeleteFunc(st.Demanded, func(d PullDemanded) bool { return strings.EqualFold(d.Repository, in.Repository) })
	if in.Demand.Interval > 0 {
		st.Demanded = append(st.Demanded, PullDemanded{Repository: in.Repository, Interval: in.Demand.Interval,
			Labels: labelsKey(in.Demand.Labels), At: at})
		slices.SortFunc(st.Demanded, func(a, b PullDemanded) int { return strings.Compare(a.Repository, b.Repository) })
	}
}

// PullDemandsInput is what PullDemandsToSend decides on.
type PullDemandsInput struct {
	Pool     string
	Labels   []string
	Repos    []string
	Interval time.Duration
	Demanded []PullDemanded
	Answers  []PulledRepo
	Now      time.Time
}

// PullDemandsToSend says which repositories' pull workflows the pool must tell something: a
// repository it reads and has not asked with these labels and interval (a Resend: the first
// ask, or new labels, must reach it), one it asked but has not heard of for
// PullShareSilenceMax (asked again with Resend: a signal-with-start restarts a workflow that
// is gone), and a withdrawal for each repository it asked and no longer reads.
func PullDemandsToSend(in PullDemandsInput) []DemandRepoPullInput {
	var out []DemandRepoPullInput
	key := labelsKey(in.Labels)
	for _, repo := range in.Repos {
		d := PullDemand{Pool: in.Pool, Labels: in.Labels, Interval: in.Interval}
		i := slices.IndexFunc(in.Demanded, func(d PullDemanded) bool { return strings.EqualFold(d.Repository, repo) })
		switch {
		case i < 0 || in.Demanded[i].Interval != in.Interval || in.Demanded[i].Labels != key:
			d.Resend = true
		case silent(in.Answers, repo, in.Demanded[i].At, in.Now):
			d.Resend = true
		default:
			continue
		}
		out = append(out, DemandRepoPullInput{Repository: repo, Demand: d})
	}
	for _, d := range in.Demanded {
		if !slices.ContainsFunc(in.Repos, func(r string) bool { return strings.EqualFold(r, d.Repository) }) {
			out = append(out, DemandRepoPullInput{Repository: d.Repository, Demand: PullDemand{Pool: in.Pool}})
		}
	}
	return out
}

// silent reports whether a repository asked at askedAt has not been heard of since
// PullShareSilenceMax, as of now.
func silent(answers []PulledRepo, repo string, askedAt, now time.Time) bool {
	last := askedAt
	if i := slices.IndexFunc(answers, func(r PulledRepo) bool { return strings.EqualFold(r.Repository, repo) }); i >= 0 && answers[i].Heard.After(last) {
		last = answers[i].Heard
	}
	return !now.Before(last.Add(PullShareSilenceMax))
}

func labelsKey(labels []string) string {
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		out = append(out, strings.ToLower(l))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// freshPulled splits the shared answers into those the pool counts on and the reasons the
// others are not counted on (stale, or silent for PullShareSilenceMax).
func freshPulled(repos []PulledRepo, now time.Time) (fresh []PulledRepo, stale []string) {
	for _, r := range repos {
		switch {
		case r.Stale != "":
			stale = append(stale, r.Repository+": "+r.Stale)
		case !now.Before(r.Heard.Add(PullShareSilenceMax)):
			stale = append(stale, fmt.Sprintf("%s: not heard of since %s", r.Repository, r.Heard.Format(time.RFC3339)))
		default:
			fresh = append(fresh, r)
		}
	}
	return fresh, stale
}

// sharedPullWake is when a shared answer falls silent (the pool then counts on its
// reservations for it, and asks again); zero when none can.
func (p *pullDemand) sharedPullWake() time.Time {
	var next time.Time
	// A runner that ended is taken to have served a listed job for an interval (want):
	// wake when that lapses, to count the job again.
	for _, f := range p.st.Finished {
		if at := f.At.Add(p.st.Spec.Pull.IntervalOrDefault()); at.After(workflow.Now(p.ctx)) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for _, r := range p.st.Pull.Repos {
		if r.Stale != "" || r.Heard.IsZero() {
			continue
		}
		if at := r.Heard.Add(PullShareSilenceMax); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}
