package poolcli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/workflows"
)

// maxRunnerReads bounds the runner workflows `starter get <pool>` reads (a description and a
// query each) to explain its waiting jobs; jobs paired with a runner beyond it are judged from
// the pool's view of that runner alone.
const maxRunnerReads = 20

// WaitingJob is one of a pool's queued jobs without a runner, and why.
type WaitingJob struct {
	// Job is the job's id; for a job of a scale set, its runner request id (the set's messages
	// carry no other).
	Job        int64     `json:"job"`
	Repository string    `json:"repository,omitempty"`
	QueuedAt   time.Time `json:"queuedAt,omitzero"`
	// Runner is the runner the job is paired with (the pool's starting runners and its waiting
	// jobs, oldest with oldest); empty when none is on its way for it.
	Runner string `json:"runner,omitempty"`
	Verdict
}

// waitingJobs are the pool's reservations no runner runs, oldest first (by when they were
// queued, then reserved, then job id).
func waitingJobs(st *workflows.PoolStatus) []workflows.Reservation {
	var out []workflows.Reservation
	for _, r := range st.Reserved {
		if !slices.ContainsFunc(st.Runners, func(pr workflows.PoolRunner) bool { return pr.JobID == r.JobID }) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b workflows.Reservation) int {
		return cmp.Or(since(a).Compare(since(b)), cmp.Compare(a.JobID, b.JobID))
	})
	return out
}

func since(r workflows.Reservation) time.Time {
	if !r.QueuedAt.IsZero() {
		return r.QueuedAt
	}
	return r.ReservedAt
}

// startingRunners are the pool's runners not yet idle or busy, oldest first. GitHub hands a
// job to whichever fitting runner asks first, so no runner is any one job's; pairing the
// oldest waiting job with the oldest starting runner says what each job waits for.
func startingRunners(st *workflows.PoolStatus) []workflows.PoolRunner {
	var out []workflows.PoolRunner
	for _, r := range st.Runners {
		if r.State == workflows.RunnerPending || r.State == workflows.RunnerRegistering {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b workflows.PoolRunner) int { return a.StartedAt.Compare(b.StartedAt) })
	return out
}

// pairedRunner is the starting runner paired with the job, if any.
func pairedRunner(st *workflows.PoolStatus, job int64) *workflows.PoolRunner {
	rank := slices.IndexFunc(waitingJobs(st), func(r workflows.Reservation) bool { return r.JobID == job })
	starting := startingRunners(st)
	if rank < 0 || rank >= len(starting) {
		return nil
	}
	return &starting[rank]
}

// readRunner is runnerFacts that judges a runner whose workflow is not visible (just started,
// or ended and removed) from the pool's view of it.
func readRunner(ctx context.Context, c client.Client, st *workflows.PoolStatus, r workflows.PoolRunner, opt WhyOptions) (*RunnerFacts, error) {
	rf, err := runnerFacts(ctx, c, st, r, opt)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return poolViewOf(st, r, opt), nil
	}
	return rf, err
}

func poolViewOf(st *workflows.PoolStatus, r workflows.PoolRunner, opt WhyOptions) *RunnerFacts {
	id := workflows.RunnerWorkflowID(st.Name, r.Name)
	return &RunnerFacts{WorkflowID: id, Started: r.StartedAt, UILink: uiLink(opt, id),
		Status: workflows.RunnerStatus{Pool: st.Name, Name: r.Name, State: r.State}}
}

// PoolWaiting explains each of the pool's waiting jobs (its reservations no runner runs, then
// its scale set's jobs no runner started): the pool's status it was given, plus a description
// and a query of each starting runner paired with a job (at most maxRunnerReads).
func PoolWaiting(ctx context.Context, c client.Client, st workflows.PoolStatus, opt WhyOptions) ([]WaitingJob, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	var jobs []WaitingJob
	var facts []WhyFacts
	for _, res := range waitingJobs(&st) {
		jobs = append(jobs, WaitingJob{Job: res.JobID, Repository: res.Repository, QueuedAt: since(res)})
		facts = append(facts, WhyFacts{Reservation: &res})
	}
	if st.ScaleSet != nil {
		for _, id := range st.ScaleSet.Ledger.Waiting {
			set := scaleSetOf(&st, id)
			jobs = append(jobs, WaitingJob{Job: id})
			facts = append(facts, WhyFacts{ScaleSet: &set})
		}
	}
	starting := startingRunners(&st)
	for i := range jobs {
		f := &facts[i]
		f.Now, f.Pools, f.Pool = now(), 1, &st
		if i < len(starting) {
			jobs[i].Runner = starting[i].Name
			f.Runner = poolViewOf(&st, starting[i], opt)
			if i < maxRunnerReads {
				rf, err := readRunner(ctx, c, &st, starting[i], opt)
				if err != nil {
					return jobs[:i], err
				}
				f.Runner = rf
			}
		}
		jobs[i].Verdict = decideCause(*f)
	}
	return jobs, nil
}

// printWaiting writes a pool's waiting jobs for a person.
func printWaiting(w io.Writer, jobs []WaitingJob) {
	if len(jobs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nWAITING JOB\tQUEUED\tCAUSE\tDETAIL")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", j.Job, clock(j.QueuedAt), j.Cause, j.Detail)
	}
	tw.Flush()
}
