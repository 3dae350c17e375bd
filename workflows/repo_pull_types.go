package workflows

import (
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

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

// repoPullServing is how a repository's pull workflow serves its pools (servePools).
var repoPullServing = serving{demandSignal: SignalPullDemand, partSignal: SignalRepoPull,
	idleExit: PullShareIdleExit, worksPerRun: PullShareReadsPerRun, what: "repository's pull"}

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

// table is the state's table of pools, as servePools keeps it.
func (st *RepoPullState) table() poolTable[PullDemand, RepoPullPool] {
	return poolTable[PullDemand, RepoPullPool]{pools: &st.Pools, idleSince: &st.IdleSince, record: RecordPullDemand}
}

// state is the state a run starts from: the one carried over, else a new one idle from now.
func (in RepoPullInput) state(ctx workflow.Context) *RepoPullState {
	if in.State != nil {
		return in.State
	}
	return &RepoPullState{Repository: in.Repository, IdleSince: workflow.Now(ctx)}
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

func (p RepoPullPool) poolName() string { return p.Pool }

func (p RepoPullPool) told(digest string, at time.Time) RepoPullPool {
	p.Sent, p.SentAt = digest, at
	return p
}

func (p RepoPullPool) withdrawal() PullDemand { return PullDemand{Pool: p.Pool} }
