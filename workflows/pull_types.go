package workflows

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PullSpec makes a pool scale from GitHub's own numbers, read on a timer, alone or beside the
// webhooks (webhooks for speed, the pull for the truth). See docs/pools.md, Pull-based scaling.
type PullSpec struct {
	// Metric is what the pool reads: PullMetricQueuedJobs or PullMetricBusyPercentage.
	Metric string `json:"metric"`
	// Interval is how often the pool reads it; default DefaultPullInterval.
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Repositories are the repositories whose queued and in-progress jobs count
	// (PullMetricQueuedJobs): names of the organization's repositories for an organization
	// pool, "owner/repo" for an enterprise pool; a repository pool reads its own repository
	// and names none.
	Repositories []string `json:"repositories,omitempty"`
	// ScaleUpThreshold and ScaleDownThreshold (PullMetricBusyPercentage) are shares of the
	// pool's online runners that are busy, in (0, 1]: at or above the first the pool grows by
	// ScaleUpFactor (> 1), at or below the second it shrinks by ScaleDownFactor (< 1).
	ScaleUpThreshold   *float64 `json:"scaleUpThreshold,omitempty"`
	ScaleDownThreshold *float64 `json:"scaleDownThreshold,omitempty"`
	ScaleUpFactor      *float64 `json:"scaleUpFactor,omitempty"`
	ScaleDownFactor    *float64 `json:"scaleDownFactor,omitempty"`
}

// The pull metrics, ARC's two.
const (
	// PullMetricQueuedJobs counts the queued jobs the pool's runners fit and the jobs its
	// runners run (ARC's TotalNumberOfQueuedAndInProgressWorkflowRuns, counted per job).
	PullMetricQueuedJobs = "QueuedAndInProgressJobs"
	// PullMetricBusyPercentage scales by the share of the pool's runners that are busy
	// (ARC's PercentageRunnersBusy).
	PullMetricBusyPercentage = "PercentageRunnersBusy"
)

// withDefaults fills in the pull's omitted settings (ARC's defaults for the thresholds and
// factors).
func (s PullSpec) withDefaults() PullSpec {
	out := s
	if out.Interval == nil {
		out.Interval = &metav1.Duration{Duration: DefaultPullInterval}
	}
	if out.Metric != PullMetricBusyPercentage {
		return out
	}
	for _, f := range []struct {
		v   **float64
		def float64
	}{
		{&out.ScaleUpThreshold, DefaultPullScaleUpThreshold}, {&out.ScaleDownThreshold, DefaultPullScaleDownThreshold},
		{&out.ScaleUpFactor, DefaultPullScaleUpFactor}, {&out.ScaleDownFactor, DefaultPullScaleDownFactor},
	} {
		if *f.v == nil {
			*f.v = ptr(f.def)
		}
	}
	return out
}

// IntervalOrDefault is how often the pool reads its metric.
func (s PullSpec) IntervalOrDefault() time.Duration {
	return durationOr(s.Interval, DefaultPullInterval)
}

// PullState is what the pool keeps of its pull across continue-as-new: when it reads next,
// GitHub's last answers with their ETags (a 304 reuses them at no budget), and the busy
// metric's last target. Nothing in it is secret.
type PullState struct {
	// Key names what the answers were read for (metric, repositories, labels); answers read for
	// another key are dropped.
	Key string `json:"key"`
	// NextAt is when the pool reads next; At when it last read, Error what its last read failed
	// with.
	NextAt time.Time `json:"nextAt,omitzero"`
	At     time.Time `json:"at,omitzero"`
	Error  string    `json:"error,omitempty"`
	// Repos are the last answers, by repository (PullMetricQueuedJobs).
	Repos []PulledRepo `json:"repos,omitempty"`
	// Target is the busy metric's last result (PullMetricBusyPercentage).
	Target int `json:"target,omitempty"`
	// Calls and NotModified count the pool's pull requests to GitHub over its life, and those
	// GitHub answered 304 Not Modified (which cost no budget).
	Calls       int64 `json:"calls,omitempty"`
	NotModified int64 `json:"notModified,omitempty"`
	// Shared: the pool reads its repositories through their shared pull workflows
	// (RepoPullWorkflow, change shared-pull); Demanded is what it asked of each.
	Shared   bool           `json:"shared,omitempty"`
	Demanded []PullDemanded `json:"demanded,omitempty"`
}

// PullDemanded is what a pool last asked of one repository's pull workflow, and when.
type PullDemanded struct {
	Repository string        `json:"repository"`
	Interval   time.Duration `json:"interval"`
	Labels     string        `json:"labels"`
	At         time.Time     `json:"at"`
}

// PulledRepo is one repository's last answers: its runs listings (queued, in progress) and
// the jobs of each run they named.
type PulledRepo struct {
	Repository string          `json:"repository"`
	Listings   []PulledListing `json:"listings,omitempty"`
	Runs       []PulledRun     `json:"runs,omitempty"`
	// At, Heard and Stale are a shared read's (pool state only): when GitHub was read, when
	// the pool was told, and why the answer must not be counted on (PullAnswerMaxAge).
	At    time.Time `json:"at,omitzero"`
	Heard time.Time `json:"heard,omitzero"`
	Stale string    `json:"stale,omitempty"`
}

// PulledListing is one runs listing of a repository by status, with its ETag.
type PulledListing struct {
	Status string  `json:"status"`
	ETag   string  `json:"etag,omitempty"`
	RunIDs []int64 `json:"runIds,omitempty"`
}

// PulledRun is one run's jobs listing, with its ETag; Jobs keeps only the queued and
// in-progress jobs the pool's runners fit. In an activity's result NotModified says GitHub
// answered 304: the jobs are the pool's from the last answer (not sent either way, to keep
// the pool's history small). ETag, Jobs and NotModified are the first page's.
type PulledRun struct {
	RunID       int64       `json:"runId"`
	ETag        string      `json:"etag,omitempty"`
	Jobs        []PulledJob `json:"jobs,omitempty"`
	NotModified bool        `json:"notModified,omitempty"`
	// More are the pages after the first of a run of more than one page of jobs (a matrix),
	// at most PullJobPagesPerRun in all, each with its own ETag.
	More []PulledPage `json:"more,omitempty"`
	// Unread: the run has jobs on pages this answer does not hold (past PullJobPagesPerRun,
	// or the read's listings ran out before them), so what it lists is not all the run needs:
	// the pool scales down on no answer with an unread page (DecidePull).
	Unread bool `json:"unread,omitempty"`
}

// PulledPage is one page after the first of a run's jobs, as PulledRun holds its first.
type PulledPage struct {
	ETag        string      `json:"etag,omitempty"`
	Jobs        []PulledJob `json:"jobs,omitempty"`
	NotModified bool        `json:"notModified,omitempty"`
}

// AllJobs are the run's jobs on every page read.
func (r PulledRun) AllJobs() []PulledJob {
	out := slices.Clone(r.Jobs)
	for _, p := range r.More {
		out = append(out, p.Jobs...)
	}
	return out
}

// PulledJob is a queued or in-progress job; RunnerName is the runner running it.
type PulledJob struct {
	ID         int64  `json:"id"`
	Status     string `json:"status"`
	RunnerName string `json:"runnerName,omitempty"`
	// Labels are the job's runs-on, kept only in a shared read's answer (PullJobsInput.AllLabels),
	// where each pool takes the jobs its labels fit.
	Labels []string `json:"labels,omitempty"`
}

// ActivityPullJobs reads the queued and in-progress jobs of a pool's repositories at GitHub.
const ActivityPullJobs = "PullJobs"

// PullJobsInput asks for the jobs of Repos ("owner/repo") that runners with Labels can run.
// Last are the previous answers without their jobs: each listing and run is asked with its
// ETag (If-None-Match); a listing GitHub answers 304 keeps its runs, a run answered 304 is
// returned NotModified.
type PullJobsInput struct {
	Pool   string       `json:"pool"`
	Labels []string     `json:"labels"`
	Repos  []string     `json:"repos"`
	Last   []PulledRepo `json:"last,omitempty"`
	// AllLabels keeps every queued and in-progress job with its labels (a shared read,
	// RepoPullWorkflow), not only those Labels fit.
	AllLabels bool `json:"allLabels,omitempty"`
}

// PullJobsResult is the new answers, one per repository of the input, and what they cost.
type PullJobsResult struct {
	// ReadAt is when the activity began reading: runners that ended after it may have run
	// jobs the answers still list (DecidePull).
	ReadAt      time.Time    `json:"readAt,omitzero"`
	Repos       []PulledRepo `json:"repos"`
	Calls       int          `json:"calls"`
	NotModified int          `json:"notModified"`
}

// PullStatus is the pull's part of PoolStatus.
type PullStatus struct {
	Metric     string    `json:"metric"`
	At         time.Time `json:"at,omitzero"`
	NextAt     time.Time `json:"nextAt,omitzero"`
	Error      string    `json:"error,omitempty"`
	Queued     int       `json:"queued"`
	InProgress int       `json:"inProgress"`
	Target     int       `json:"target,omitempty"`
	// Shared: the repositories are read by their shared pull workflows; Stale lists those
	// whose answer is too old to count on, with why (the pool counts their jobs from its
	// reservations alone).
	Shared bool     `json:"shared,omitempty"`
	Stale  []string `json:"stale,omitempty"`
	// UnreadRuns counts the runs with jobs on pages the last answers do not hold: the pool
	// does not scale down meanwhile.
	UnreadRuns  int   `json:"unreadRuns,omitempty"`
	Calls       int64 `json:"calls"`
	NotModified int64 `json:"notModified"`
}

// LabelsFit reports whether runners with poolLabels can run a job whose runs-on is jobLabels:
// every job label except "self-hosted" is among the pool's, compared case-insensitively. The
// webhook intake routes jobs by it and the pull counts them by it.
func LabelsFit(poolLabels, jobLabels []string) bool {
	for _, l := range jobLabels {
		if strings.EqualFold(l, "self-hosted") {
			continue
		}
		if !slices.ContainsFunc(poolLabels, func(p string) bool { return strings.EqualFold(p, l) }) {
			return false
		}
	}
	return true
}

// withoutJobs is the last answers as the activity needs them: ETags and run ids, no jobs.
func withoutJobs(repos []PulledRepo) []PulledRepo {
	out := make([]PulledRepo, 0, len(repos))
	for _, r := range repos {
		c := PulledRepo{Repository: r.Repository, Listings: r.Listings}
		for _, run := range r.Runs {
			bare := PulledRun{RunID: run.RunID, ETag: run.ETag, Unread: run.Unread}
			for _, pg := range run.More {
				bare.More = append(bare.More, PulledPage{ETag: pg.ETag})
			}
			c.Runs = append(c.Runs, bare)
		}
		out = append(out, c)
	}
	return out
}

// mergePulled takes a read's answers, with the jobs of each page GitHub answered 304 for (or
// the read had no room for) taken from the last answers.
func mergePulled(prev, cur []PulledRepo) []PulledRepo {
	out := make([]PulledRepo, 0, len(cur))
	for _, r := range cur {
		m := PulledRepo{Repository: r.Repository, Listings: r.Listings}
		for _, run := range r.Runs {
			last := lastRunOf(prev, r.Repository, run.RunID)
			if run.NotModified {
				run.Jobs, run.NotModified = last.Jobs, false
			}
			run.More = slices.Clone(run.More)
			for i := range run.More {
				if run.More[i].NotModified && i < len(last.More) {
					run.More[i].Jobs = last.More[i].Jobs
				}
				run.More[i].NotModified = false
			}
			m.Runs = append(m.Runs, run)
		}
		out = append(out, m)
	}
	return out
}

func lastRunOf(prev []PulledRepo, repo string, runID int64) PulledRun {
	for _, r := range prev {
		if r.Repository != repo {
			continue
		}
		for _, run := range r.Runs {
			if run.RunID == runID {
				return run
			}
		}
	}
	return PulledRun{}
}
