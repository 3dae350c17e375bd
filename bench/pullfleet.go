package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	// pullFleetRepos is how many repositories each pull pool reads (the most a pull section
	// names: workflows.MaxPullRepositories), and pullFleetDistinct how many distinct ones the
	// fleet reads: pool i reads the 20 starting at 4i, so neighbouring pools share most of theirs.
	pullFleetRepos    = workflows.MaxPullRepositories
	pullFleetDistinct = 40
	pullFleetStride   = 4
	// pullFleetIntervals is how many pull intervals each window spans.
	pullFleetIntervals = 2
	// pullFleetQueueEvery: in the busy window a job is queued in every repository this often,
	// so every read finds new runs (no answer is a 304).
	pullFleetQueueEvery = 20 * time.Second
	// hourlyBudget is GitHub's hourly budget of a token or most App installations.
	hourlyBudget = 5000
)

// PullFleetResult is the pull fleet: --pools pools with a pull section of 20 repositories each
// (and no runners: max 0), measured at rest and while every repository gets new jobs.
type PullFleetResult struct {
	Pools        int `json:"pools"`
	ReposPerPool int `json:"reposPerPool"`
	Distinct     int `json:"distinctRepos"`
	// Rest and Busy are the windows; PerPoolCallsPerHour what one read per pool and repository
	// would cost (two runs listings each, per interval; computed).
	Rest                PullWindow `json:"rest"`
	Busy                PullWindow `json:"busy"`
	PerPoolCallsPerHour float64    `json:"perPoolCallsPerHour"`
}

// PullWindow is one measured window of the pull fleet.
type PullWindow struct {
	Seconds float64 `json:"seconds"`
	// Calls are all GitHub API calls; NotModified those answered 304 (not charged to the hour's
	// budget); Charged the rest. Per hour, and Charged as a share of the hourly budget.
	Calls              int     `json:"calls"`
	NotModified        int     `json:"notModified"`
	CallsPerHour       float64 `json:"callsPerHour"`
	ChargedPerHour     float64 `json:"chargedPerHour"`
	ChargedBudgetShare float64 `json:"chargedBudgetShare"`
}

// pullFleet runs the phase: the pools and their repositories, a rest window once every pool
// has heard of every repository, a busy window, then clean-up.
func (e *env) pullFleet(ctx context.Context) (PullFleetResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.PhaseTimeout)
	defer cancel()
	res := PullFleetResult{Pools: e.opts.Pools, ReposPerPool: pullFleetRepos, Distinct: pullFleetDistinct}
	org, labels := "org-pull", []string{"self-hosted", "pull-fleet"}
	ns, err := e.newNamespace(ctx, "pull")
	if err != nil {
		return res, err
	}
	var repos []string
	for i := range pullFleetDistinct {
		repos = append(repos, fmt.Sprintf("repo-%02d", i))
		if err := e.world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: org + "/" + repos[i]}); err != nil {
			return res, err
		}
	}
	var pools []string
	var specs []workflows.PoolSpec
	for i := range e.opts.Pools {
		name := fmt.Sprintf("pull-%02d", i)
		pools = append(pools, name)
		spec := poolSpec(name, org, ns, 0, 0)
		spec.Labels = labels
		spec.Pull = &workflows.PullSpec{Metric: workflows.PullMetricQueuedJobs, Interval: &metav1.Duration{Duration: workflows.DefaultPullInterval}}
		for j := range pullFleetRepos {
			spec.Pull.Repositories = append(spec.Pull.Repositories, repos[(i*pullFleetStride+j)%pullFleetDistinct])
		}
		specs = append(specs, spec)
	}
	defer e.terminatePools(context.Background(), pools...)
	if err := e.apply(ctx, specs...); err != nil {
		return res, err
	}
	if err := pollEvery(ctx, 5*time.Second, "every pull pool to hear of its repositories", func() (bool, error) {
		for _, p := range pools {
			st, err := e.status(ctx, p)
			if err != nil || st.Pull == nil || st.Pull.At.IsZero() {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return res, err
	}
	e.say("pull fleet: %d pools × %d repositories (%d distinct) reading; %d intervals at rest", len(pools), pullFleetRepos, pullFleetDistinct, pullFleetIntervals)
	window := pullFleetIntervals * workflows.DefaultPullInterval
	if res.Rest, err = e.pullWindow(ctx, window, nil); err != nil {
		return res, err
	}
	e.say("pull fleet: busy, a job queued in every repository every %s", pullFleetQueueEvery)
	var jobs []int64
	res.Busy, err = e.pullWindow(ctx, window, func() error {
		for _, r := range repos {
			j, err := e.world.GitHub.QueueJob(githubdouble.JobSpec{Repository: org + "/" + r, Labels: labels})
			if err != nil {
				return err
			}
			jobs = append(jobs, j.ID)
		}
		return nil
	})
	for _, id := range jobs {
		_ = e.world.GitHub.CancelJob(id)
	}
	res.PerPoolCallsPerHour = float64(e.opts.Pools*pullFleetRepos*2) * float64(time.Hour/workflows.DefaultPullInterval)
	return res, err
}

// pullWindow counts the GitHub calls over d; busy, when set, runs every pullFleetQueueEvery.
func (e *env) pullWindow(ctx context.Context, d time.Duration, busy func() error) (PullWindow, error) {
	gh := e.world.GitHub
	gh.ResetCalls()
	start := time.Now()
	tick := time.NewTicker(pullFleetQueueEvery)
	defer tick.Stop()
	for end := time.After(d); ; {
		if busy != nil {
			if err := busy(); err != nil {
				return PullWindow{}, err
			}
		}
		select {
		case <-ctx.Done():
			return PullWindow{}, ctx.Err()
		case <-end:
			secs := time.Since(start).Seconds()
			w := PullWindow{Seconds: round1(secs)}
			for k, n := range gh.Calls() {
				w.Calls += n
				if k.Status == http.StatusNotModified {
					w.NotModified += n
				}
			}
			w.CallsPerHour = round1(float64(w.Calls) * 3600 / secs)
			w.ChargedPerHour = round1(float64(w.Calls-w.NotModified) * 3600 / secs)
			w.ChargedBudgetShare = round1(100 * w.ChargedPerHour / hourlyBudget)
			return w, nil
		case <-tick.C:
		}
	}
}

// printPullFleet prints the pull fleet's rows.
func printPullFleet(w io.Writer, f *PullFleetResult) {
	if f == nil {
		return
	}
	title := fmt.Sprintf("P %d pull pools × %d repositories (%d distinct)", f.Pools, f.ReposPerPool, f.Distinct)
	for i, x := range []struct {
		name string
		w    PullWindow
	}{{"at rest", f.Rest}, {"busy", f.Busy}} {
		if i > 0 {
			title = ""
		}
		row(w, title, "GitHub calls/hour "+x.name, fmt.Sprintf("%.0f (%d in %.0fs, %d answered 304), %.0f charged to the hourly budget: %.1f%% of %d",
			x.w.CallsPerHour, x.w.Calls, x.w.Seconds, x.w.NotModified, x.w.ChargedPerHour, x.w.ChargedBudgetShare, hourlyBudget))
	}
	row(w, "", "one read per pool (computed)", fmt.Sprintf("%.0f calls/hour for the runs listings alone, every one a 304 at rest", f.PerPoolCallsPerHour))
}
