package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// changePullScaling gates pull-based scaling (a spec's pull section). It is asked only by a
// pool whose spec has one, which no pool before this release could have: a pool without a
// pull section records no marker and issues exactly the commands it issued before, so its
// histories replay unchanged. The gate marks the histories that read GitHub on the pool's
// timer, so a later change to what the pull issues can tell them apart.
const changePullScaling = "pull-scaling"

// askPullScaling is changePullScaling's one GetVersion call, for its gate.
func askPullScaling(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changePullScaling, workflow.DefaultVersion, 1)
}

// pullDemand is the demand of a pool with a pull section (pull_types.go): GitHub's queued and
// in-progress jobs, read on the pool's timer (here) or through the repositories' shared pull
// workflows (pool_pull_shared.go), counted with the reservations by DecidePull. A run whose pull
// section was removed keeps it: it withdraws the shared demands it made, then wants nothing.
type pullDemand struct {
	*poolRun
	// scaling is changePullScaling's gate, shared changeSharedPull's.
	scaling, shared gate
	// reading is true while a read or a batch of demands runs beside the loop.
	reading bool
}

func newPullDemand(p *poolRun) *pullDemand {
	return &pullDemand{poolRun: p, scaling: gate{ask: askPullScaling}, shared: gate{ask: askSharedPull}}
}

// hear takes a repository's part of a shared read.
func (p *pullDemand) hear(news demandNews) {
	if s, ok := news.(RepoPullSignal); ok {
		p.onRepoPull(s)
	}
}

// busy is true while a read or a batch of demands runs.
func (p *pullDemand) busy() bool { return p.reading }

// status puts the pull's part in the pool's status.
func (p *pullDemand) status(out *PoolStatus) { out.Pull = p.pullStatus() }

// pullOn reports whether this run scales from the pull: the spec has a pull section and the
// history is of a release that has the pull (asked once per run, when the spec first has one).
func (p *pullDemand) pullOn() bool {
	return p.st.Spec.Pull != nil && p.scaling.inForce(p.ctx)
}

// tend is the pull's step in the pool's loop, before the decision: when a read is due, the
// busy metric takes its new target from the pool's own runners (no call: their busy state is
// GitHub's, from the runners' reports and the scope's runner listing), and the queued metric
// reads GitHub beside the loop (one activity on the GitHub queue). A run whose pull section
// was removed only withdraws its shared demands here.
func (p *pullDemand) tend(now time.Time) {
	if !p.pullOn() {
		if st := p.st.Pull; st != nil && len(st.Demanded) > 0 {
			p.tendSharedPull(now) // withdraw from the shared reads first
			return
		}
		p.st.Pull = nil
		return
	}
	spec := *p.st.Spec.Pull
	key := p.pullKey()
	if p.st.Pull == nil || p.st.Pull.Key != key {
		// What was read for other repositories, labels or metric counts for nothing now; what
		// was asked of shared reads stays, to be changed or withdrawn.
		next := &PullState{Key: key, Calls: p.pullCalls(), NotModified: p.pullNotModified()}
		if p.st.Pull != nil {
			next.Shared, next.Demanded = p.st.Pull.Shared, p.st.Pull.Demanded
		}
		p.st.Pull = next
	}
	shared := p.sharesPull()
	p.st.Pull.Shared = shared
	if shared || len(p.st.Pull.Demanded) > 0 {
		p.tendSharedPull(now) // demands, or a withdrawal after the metric changed
		if shared {
			return
		}
	}
	st := p.st.Pull
	if p.reading || now.Before(st.NextAt) {
		return
	}
	st.NextAt = now.Add(spec.IntervalOrDefault())
	if spec.Metric == PullMetricBusyPercentage {
		st.Target = DecidePull(p.pullInput(now, true)).Target
		st.At = now
		return
	}
	p.startPull(now, key)
}

// startPull reads the pool's repositories at GitHub, passing the last answers with their
// ETags, and keeps the new answers when they are still for the spec in force.
func (p *pullDemand) startPull(now time.Time, key string) {
	in := PullJobsInput{Pool: p.st.Spec.Name, Labels: p.st.Spec.Labels, Repos: p.pullRepos(), Last: withoutJobs(p.st.Pull.Repos)}
	p.reading = true
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		defer func() { p.reading, p.changed = false, true }()
		var out PullJobsResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, PoolPullPolicy), ActivityPullJobs, in).Get(ctx, &out)
		st := p.st.Pull
		if st == nil || st.Key != key {
			return
		}
		if err != nil {
			// The next read is at the next interval anyway; the last answers stay in force.
			st.Error = err.Error()
			p.logger.Warn("Pull failed", "error", err)
			return
		}
		st.Calls += int64(out.Calls)
		st.NotModified += int64(out.NotModified)
		prev := st.Repos
		st.Repos, st.At, st.Error = mergePulled(prev, out.Repos), now, ""
		if !out.ReadAt.IsZero() {
			st.At = out.ReadAt
		}
		p.applyPulledJobs(st.Repos)
		p.endJobsGone(prev, st.Repos)
	})
}

// endJobsGone ends the reservations of jobs the last answer listed queued or in progress and
// this one lists neither: GitHub says they are over, whatever webhooks were lost. Only a
// complete answer says so (no listing at its one page's limit, no run with an unread page).
func (p *pullDemand) endJobsGone(prev, cur []PulledRepo) {
	listed := map[int64]bool{}
	for _, repo := range cur {
		for _, l := range repo.Listings {
			if len(l.RunIDs) >= PullRunsPerListing {
				return
			}
		}
		for _, run := range repo.Runs {
			if run.Unread {
				return
			}
			for _, j := range run.AllJobs() {
				listed[j.ID] = true
			}
		}
	}
	for _, repo := range prev {
		for _, run := range repo.Runs {
			for _, j := range run.AllJobs() {
				if !listed[j.ID] && p.st.Reserved.Holds(j.ID, workflow.Now(p.ctx)) {
					p.endJobID(j.ID)
				}
			}
		}
	}
}

// applyPulledJobs takes what GitHub says about running jobs that the webhooks may not have
// said (a dropped in_progress delivery): a runner of the pool GitHub names on a job now has
// that job, so the job's reservation ends when the runner leaves it; a reserved job GitHub
// names on a runner that is not one of the pool's is served elsewhere.
func (p *pullDemand) applyPulledJobs(repos []PulledRepo) {
	for _, repo := range repos {
		for _, run := range repo.Runs {
			for _, j := range run.AllJobs() {
				if j.Status != JobInProgress || j.RunnerName == "" {
					continue
				}
				if i := p.find(j.RunnerName); i >= 0 {
					if r := &p.st.Runners[i]; r.JobID == 0 {
						r.JobID = j.ID
					}
					continue
				}
				if slices.ContainsFunc(p.st.Reserved.Reservations, func(r Reservation) bool { return r.JobID == j.ID }) {
					p.endJobID(j.ID)
				}
			}
		}
	}
}

// want is the pull's demand for Decide; nil while the spec has no pull section.
func (p *pullDemand) want(now time.Time) *Demand {
	if !p.pullOn() || p.st.Pull == nil {
		return nil
	}
	in := p.pullInput(now, false)
	var stale []string
	if p.st.Pull.Shared {
		in.Repos, stale = freshPulled(in.Repos, now)
		// A shared answer comes only when it changed: unchanged, it holds as of the shared
		// read at most an interval ago, so only runners that ended since then may have run a
		// job it lists. With no answer counted on, none is taken to have.
		in.ReadAt = laterOf(in.ReadAt, now.Add(-p.st.Spec.Pull.IntervalOrDefault()))
		if len(in.Repos) == 0 {
			in.ReadAt = now
		}
	}
	d := DecidePull(in)
	if len(stale) > 0 {
		d.Why += fmt.Sprintf("; %d repositories' answers not counted on (older than %s): their jobs counted from reservations alone",
			len(stale), PullAnswerMaxAge)
	}
	return &d
}

func (p *pullDemand) pullInput(now time.Time, evaluate bool) PullDecideInput {
	in := PullDecideInput{
		Now: now, Pool: p.st.Spec.Name, Spec: *p.st.Spec.Pull, Bounds: p.bounds(now),
		Runners: p.st.Runners, Reserved: p.st.Reserved, Evaluate: evaluate,
	}
	if st := p.st.Pull; st != nil {
		in.Repos, in.ReadAt, in.Target, in.Finished = st.Repos, st.At, st.Target, p.st.Finished
	}
	return in
}

// wake is when the next read is due; zero without a pull or while one runs.
func (p *pullDemand) wake(time.Time) time.Time {
	if p.reading || p.st.Pull == nil || p.st.Spec.Pull == nil {
		return time.Time{}
	}
	if p.st.Pull.Shared {
		return p.sharedPullWake()
	}
	return p.st.Pull.NextAt
}

// pullRepos are the repositories the pool reads, as "owner/repo".
func (p *pullDemand) pullRepos() []string {
	spec := p.st.Spec
	switch {
	case spec.Pull.Metric != PullMetricQueuedJobs:
		return nil
	case spec.Repository != "":
		return []string{spec.Repository}
	case spec.Organization != "":
		out := make([]string, 0, len(spec.Pull.Repositories))
		for _, r := range spec.Pull.Repositories {
			out = append(out, spec.Organization+"/"+r)
		}
		return out
	}
	return slices.Clone(spec.Pull.Repositories)
}

// pullKey names what the answers are read for.
func (p *pullDemand) pullKey() string {
	return p.st.Spec.Pull.Metric + "|" + strings.ToLower(strings.Join(p.pullRepos(), ",")) + "|" + strings.Join(p.st.Spec.lowerLabels(), ",")
}

func (p *pullDemand) pullCalls() int64 {
	if p.st.Pull == nil {
		return 0
	}
	return p.st.Pull.Calls
}

func (p *pullDemand) pullNotModified() int64 {
	if p.st.Pull == nil {
		return 0
	}
	return p.st.Pull.NotModified
}

// pullStatus is the pull's part of the pool's status.
func (p *pullDemand) pullStatus() *PullStatus {
	st := p.st.Pull
	if st == nil || p.st.Spec.Pull == nil {
		return nil
	}
	out := &PullStatus{Metric: p.st.Spec.Pull.Metric, At: st.At, NextAt: st.NextAt, Error: st.Error, Target: st.Target,
		Calls: st.Calls, NotModified: st.NotModified, Shared: st.Shared}
	repos := st.Repos
	if st.Shared {
		repos, out.Stale = freshPulled(st.Repos, workflow.Now(p.ctx))
	}
	for _, repo := range repos {
		for _, run := range repo.Runs {
			if run.Unread {
				out.UnreadRuns++
			}
			for _, j := range run.AllJobs() {
				if j.Status == JobQueued {
					out.Queued++
				} else {
					out.InProgress++
				}
			}
		}
	}
	return out
}
