package workflows

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// RepoPullWorkflow reads one repository's queued and in-progress jobs for every pool that pulls
// it: one read per interval however many pools read the repository, where each pool used to
// read it itself (50 pools of 20 repositories made 50 reads of each). It is the runner
// listing's pattern (ScopeListingWorkflow) applied to the pull.
//
// Pools ask (SignalPullDemand, through the DemandRepoPull activity's signal-with-start) with
// their labels and interval; the workflow reads at the shortest interval asked (the PullJobs
// activity, every request conditional on the last answer's ETag), keeps each pool's part (the
// jobs its labels fit) and signals it (SignalRepoPull) only when that part changed, when the
// answer went stale (no read succeeded for PullAnswerMaxAge: the pool then counts on its
// reservations), or PullShareResendAfter after it last did. A pool that no longer exists is
// dropped; with no pool asking for PullShareIdleExit the workflow ends.
func RepoPullWorkflow(ctx workflow.Context, in RepoPullInput) (RepoPullResult, error) {
	logger := log.With(workflow.GetLogger(ctx), "repository", in.Repository)
	var server poolServer[PullDemand, RepoPullPool] = in.state(ctx)
	return RepoPullResult{}, servePools(ctx, logger, server, repoPullServing)
}

// NextRepoPull is when the repository is next read: the last read plus the shortest interval
// asked (never under MinPullInterval); zero when no pool asks.
func NextRepoPull(st RepoPullState) time.Time {
	return nextWork(st.Pools, st.LastRead, func(p RepoPullPool) time.Duration { return max(p.Interval, MinPullInterval) })
}

func (st *RepoPullState) due(time.Time) time.Time { return NextRepoPull(*st) }

// RecordPullDemand applies one pool's demand: a withdrawal removes the pool, a new pool, new
// labels or a Resend make the next read reach it.
func RecordPullDemand(pools []RepoPullPool, d PullDemand) []RepoPullPool {
	pools, p := applyDemand(pools, RepoPullPool{PullDemand: d}, d.Interval)
	if p == nil {
		return pools
	}
	if d.Resend || !slices.Equal(p.Labels, d.Labels) {
		p.Sent = ""
	}
	p.PullDemand = PullDemand{Pool: d.Pool, Labels: d.Labels, Interval: d.Interval}
	return pools
}

// RepoPullSend is one pool's part to signal.
type RepoPullSend struct {
	Pool   string
	Digest string
	Signal RepoPullSignal
}

// SplitRepoPull gives each pool the jobs of the answer its labels fit, and says which pools
// must be told: those whose part (or staleness) differs from what they were last told, and
// those told PullShareResendAfter ago or more.
func SplitRepoPull(st RepoPullState, now time.Time) []RepoPullSend {
	stale := ""
	if !now.Before(st.LastOK.Add(PullAnswerMaxAge)) {
		stale = "no read of " + st.Repository + " succeeded since " + st.LastOK.Format(time.RFC3339)
		if st.LastOK.IsZero() {
			stale = "no read of " + st.Repository + " succeeded yet"
		}
		if st.LastError != "" {
			stale += ": " + st.LastError
		}
	}
	var out []RepoPullSend
	for _, p := range st.Pools {
		part := FitPulledRepo(st.Answer, p.Labels)
		digest := pulledDigest(part, stale != "")
		if digest != p.Sent || !now.Before(p.SentAt.Add(PullShareResendAfter)) {
			out = append(out, RepoPullSend{Pool: p.Pool, Digest: digest, Signal: RepoPullSignal{Repo: part, At: st.LastOK, Stale: stale}})
		}
	}
	return out
}

// FitPulledRepo keeps the jobs of an answer that runners with labels fit (LabelsFit, the rule
// the webhook intake routes by), and drops the jobs' labels.
func FitPulledRepo(r PulledRepo, labels []string) PulledRepo {
	out := PulledRepo{Repository: r.Repository}
	for _, l := range r.Listings {
		out.Listings = append(out.Listings, PulledListing{Status: l.Status, RunIDs: l.RunIDs})
	}
	for _, run := range r.Runs {
		c := PulledRun{RunID: run.RunID, Unread: run.Unread}
		c.Jobs = fitJobs(run.Jobs, labels)
		for _, pg := range run.More {
			c.More = append(c.More, PulledPage{Jobs: fitJobs(pg.Jobs, labels)})
		}
		out.Runs = append(out.Runs, c)
	}
	return out
}

// pulledDigest names a pool's part: the same jobs, runs and staleness give the same digest;
// never "" (which means nothing sent).
func pulledDigest(r PulledRepo, stale bool) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%t|", stale)
	for _, l := range r.Listings {
		_, _ = fmt.Fprintf(h, "%s:%v|", l.Status, l.RunIDs)
	}
	for _, run := range r.Runs {
		_, _ = fmt.Fprintf(h, "%d:%t:", run.RunID, run.Unread)
		for _, j := range run.AllJobs() {
			_, _ = fmt.Fprintf(h, "%d/%s/%s,", j.ID, j.Status, j.RunnerName)
		}
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func fitJobs(jobs []PulledJob, labels []string) []PulledJob {
	var out []PulledJob
	for _, j := range jobs {
		if LabelsFit(labels, j.Labels) {
			j.Labels = nil
			out = append(out, j)
		}
	}
	return out
}

// work reads the repository once (every job, whatever its labels) and returns each pool's part
// to tell it.
func (st *RepoPullState) work(ctx workflow.Context, logger log.Logger) []poolPart {
	in := PullJobsInput{Pool: RepoPullWorkflowID(st.Repository), Repos: []string{st.Repository},
		AllLabels: true, Last: withoutJobs([]PulledRepo{st.Answer})}
	var out PullJobsResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, PoolPullPolicy), ActivityPullJobs, in).Get(ctx, &out)
	now := workflow.Now(ctx)
	st.LastRead, st.LastError = now, ""
	st.Reads++
	switch {
	case err != nil:
		st.LastError = err.Error()
		logger.Warn("Shared pull failed", "error", err)
	case len(out.Repos) == 1:
		st.Calls += int64(out.Calls)
		st.NotModified += int64(out.NotModified)
		st.Answer = mergePulled([]PulledRepo{st.Answer}, out.Repos)[0]
		st.LastOK = now
		if !out.ReadAt.IsZero() {
			st.LastOK = out.ReadAt
		}
	}
	sends := SplitRepoPull(*st, now)
	parts := make([]poolPart, len(sends))
	for i, s := range sends {
		parts[i] = poolPart{Pool: s.Pool, Digest: s.Digest, Arg: s.Signal}
	}
	st.Signals += int64(len(parts))
	return parts
}

// continueAsNew hands the state to the workflow's next run.
func (st *RepoPullState) continueAsNew(ctx workflow.Context) error {
	next := *st
	return workflow.NewContinueAsNewError(onDecisionQueue(ctx, askPullDecidesApart), RepoPullWorkflowType, RepoPullInput{Repository: st.Repository, State: &next})
}
