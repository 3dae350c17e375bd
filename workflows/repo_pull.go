package workflows

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
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
	r := &repoPull{ctx: ctx, logger: log.With(workflow.GetLogger(ctx), "repository", in.Repository)}
	if in.State != nil {
		r.st = *in.State
	} else {
		r.st = RepoPullState{Repository: in.Repository, IdleSince: workflow.Now(ctx)}
	}
	return RepoPullResult{}, r.run()
}

// RepoPullWorkflowType is the shared pull workflow's registered name.
const RepoPullWorkflowType = "repo-pull"

// RepoPullWorkflowID is the id of a repository's one pull workflow; GitHub's names are
// case-insensitive, so it is lower-cased.
func RepoPullWorkflowID(repo string) string { return "pull/" + strings.ToLower(repo) }

// Signals of the shared pull.
const (
	// SignalPullDemand is a pool asking a repository's pull workflow for its jobs (PullDemand).
	SignalPullDemand = "pull-demand"
	// SignalRepoPull is the repository's pull workflow telling a pool its part (RepoPullSignal).
	SignalRepoPull = "repo-pull"
)

// ActivityDemandRepoPull hands a pool's PullDemand to the repository's pull workflow, starting
// it if it is not running (one signal-with-start).
const ActivityDemandRepoPull = "DemandRepoPull"

// RepoPullInput starts (or continues) a repository's pull workflow.
type RepoPullInput struct {
	Repository string `json:"repository"`
	// State is set only by the workflow itself when it continues as new.
	State *RepoPullState `json:"state,omitempty"`
}

// RepoPullResult is what the workflow returns when no pool has asked for a while.
type RepoPullResult struct{}

// PullDemand is what one pool asks of a repository's pull workflow.
type PullDemand struct {
	Pool string `json:"pool"`
	// Labels are the pool's runner labels: the pool is told the jobs they fit.
	Labels []string `json:"labels,omitempty"`
	// Interval is how often the pool wants the repository read; zero withdraws the pool.
	Interval time.Duration `json:"interval"`
	// Resend asks for the pool's part with the next read even if it is unchanged.
	Resend bool `json:"resend,omitempty"`
}

// DemandRepoPullInput is one pool's demand for one repository ("owner/repo").
type DemandRepoPullInput struct {
	Repository string     `json:"repository"`
	Demand     PullDemand `json:"demand"`
}

// DemandRepoPullResult is empty: the demand was delivered.
type DemandRepoPullResult struct{}

// RepoPullSignal is one pool's part of a repository's read.
type RepoPullSignal struct {
	// Repo is the answer: the runs and the jobs the pool's labels fit, read at At.
	Repo PulledRepo `json:"repo"`
	At   time.Time  `json:"at"`
	// Stale says no read succeeded for PullAnswerMaxAge (why): Repo is the last answer, which
	// the pool must not count on.
	Stale string `json:"stale,omitempty"`
}

// RepoPullState is everything the workflow knows, carried across continue-as-new.
type RepoPullState struct {
	Repository string         `json:"repository"`
	Pools      []RepoPullPool `json:"pools,omitempty"`
	// Answer is the last answer with every queued and in-progress job (and its labels).
	Answer PulledRepo `json:"answer"`
	// LastRead is when the last read ended (read or failed), LastOK when one last succeeded
	// (the answer's age), LastError the last failure.
	LastRead  time.Time `json:"lastRead,omitzero"`
	LastOK    time.Time `json:"lastOk,omitzero"`
	LastError string    `json:"lastError,omitempty"`
	// Reads, Calls, NotModified and Signals count over the workflow's life.
	Reads       int64     `json:"reads"`
	Calls       int64     `json:"calls"`
	NotModified int64     `json:"notModified"`
	Signals     int64     `json:"signals"`
	IdleSince   time.Time `json:"idleSince,omitzero"`
}

// RepoPullPool is one pool's demand and what it was last told.
type RepoPullPool struct {
	PullDemand
	Sent   string    `json:"sent,omitempty"`
	SentAt time.Time `json:"sentAt,omitzero"`
}

// NextRepoPull is when the repository is next read: the last read plus the shortest interval
// asked (never under MinPullInterval); zero when no pool asks.
func NextRepoPull(st RepoPullState) time.Time {
	var shortest time.Duration
	for _, p := range st.Pools {
		if d := max(p.Interval, MinPullInterval); shortest == 0 || d < shortest {
			shortest = d
		}
	}
	if shortest == 0 {
		return time.Time{}
	}
	return st.LastRead.Add(shortest)
}

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

// repoPull is one run of a repository's pull workflow.
type repoPull struct {
	ctx     workflow.Context
	st      RepoPullState
	logger  log.Logger
	changed bool
	demands demandSignals[PullDemand]
	reads   int
}

func (r *repoPull) run() error {
	if err := workflow.SetQueryHandler(r.ctx, QueryStatus, func() (RepoPullState, error) { return r.st, nil }); err != nil {
		return err
	}
	r.demands = listenForDemands(r.ctx, SignalPullDemand, r.record)
	for {
		now := workflow.Now(r.ctx)
		r.changed = false
		if due := NextRepoPull(r.st); !due.IsZero() && !now.Before(due) {
			r.read()
			continue
		}
		if len(r.st.Pools) == 0 && !now.Before(r.st.IdleSince.Add(PullShareIdleExit)) {
			if !r.demands.drain() {
				return nil
			}
			continue
		}
		if workflow.GetInfo(r.ctx).GetContinueAsNewSuggested() || r.reads >= PullShareReadsPerRun {
			r.demands.drain()
			st := r.st
			return workflow.NewContinueAsNewError(r.ctx, RepoPullWorkflowType, RepoPullInput{Repository: st.Repository, State: &st})
		}
		if err := r.wait(now); err != nil {
			return err
		}
	}
}

func (r *repoPull) record(d PullDemand) {
	r.st.Pools = RecordPullDemand(r.st.Pools, d)
	if len(r.st.Pools) == 0 {
		r.st.IdleSince = workflow.Now(r.ctx)
	}
	r.changed = true
}

// wait blocks until a demand arrives or the next read (or the idle exit) is due.
func (r *repoPull) wait(now time.Time) error {
	wake := NextRepoPull(r.st)
	if len(r.st.Pools) == 0 {
		wake = r.st.IdleSince.Add(PullShareIdleExit)
	}
	return awaitWake(r.ctx, now, wake, func() bool { return r.changed })
}

// read reads the repository once (every job, whatever its labels) and tells each pool its part.
func (r *repoPull) read() {
	in := PullJobsInput{Pool: RepoPullWorkflowID(r.st.Repository), Repos: []string{r.st.Repository},
		AllLabels: true, Last: withoutJobs([]PulledRepo{r.st.Answer})}
	var out PullJobsResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, PoolPullPolicy), ActivityPullJobs, in).Get(r.ctx, &out)
	now := workflow.Now(r.ctx)
	r.st.LastRead, r.st.LastError = now, ""
	r.st.Reads++
	r.reads++
	switch {
	case err != nil:
		r.st.LastError = err.Error()
		r.logger.Warn("Shared pull failed", "error", err)
	case len(out.Repos) == 1:
		r.st.Calls += int64(out.Calls)
		r.st.NotModified += int64(out.NotModified)
		r.st.Answer = mergePulled([]PulledRepo{r.st.Answer}, out.Repos)[0]
		r.st.LastOK = now
		if !out.ReadAt.IsZero() {
			r.st.LastOK = out.ReadAt
		}
	}
	r.tell(SplitRepoPull(r.st, now), now)
}

// tell signals each pool its part, all at once, and drops the pools that no longer exist.
func (r *repoPull) tell(sends []RepoPullSend, now time.Time) {
	signals := make([]poolSignal, len(sends))
	for i, s := range sends {
		signals[i] = poolSignal{Pool: s.Pool, Arg: s.Signal}
	}
	r.st.Signals += int64(len(sends))
	signalPools(r.ctx, SignalRepoPull, signals, func(i int, err error) {
		j := slices.IndexFunc(r.st.Pools, func(p RepoPullPool) bool { return p.Pool == sends[i].Pool })
		switch {
		case j < 0: // withdrew meanwhile
		case poolGone(err):
			r.logger.Info("Pool no longer exists; dropped from the repository's pull", "pool", sends[i].Pool)
			r.record(PullDemand{Pool: sends[i].Pool})
		case err != nil:
			r.logger.Warn("Pull signal to pool failed", "pool", sends[i].Pool, "error", err)
		default:
			r.st.Pools[j].Sent, r.st.Pools[j].SentAt = sends[i].Digest, now
		}
	})
}
