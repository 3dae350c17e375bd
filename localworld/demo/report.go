package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// Stage is a point in a job's scale-up that the summary measures from the job being queued.
type Stage string

// The stages, in the order they happen.
const (
	StagePodCreated   Stage = "its runner's pod created"
	StageRunnerOnline Stage = "its runner online"
	StageJobStarted   Stage = "the job started"
)

var stages = []Stage{StagePodCreated, StageRunnerOnline, StageJobStarted}

func printAddresses(out io.Writer, s *System) {
	ui, ns := s.World.Temporal.UIAddress, s.World.Temporal.Namespace
	fmt.Fprintf(out, "\n  Temporal UI      %s\n", ui)
	fmt.Fprintf(out, "    pools          %s\n", uiLink(ui, ns, "WorkflowType='pool'"))
	fmt.Fprintf(out, "    busy runners   %s\n", uiLink(ui, ns, "RunnerPool='org-linux' AND RunnerState='busy'"))
	fmt.Fprintf(out, "  Temporal         %s (namespace %s), e.g. bin/temporal workflow list --address %s --query \"RunnerPool='web-large'\"\n",
		s.World.Temporal.Address, ns, s.World.Temporal.Address)
	fmt.Fprintf(out, "  metrics          %s\n", s.MetricsURL)
	fmt.Fprintf(out, "  webhook intake   %s\n", s.IntakeURL)
	fmt.Fprintf(out, "  GitHub double    %s\n", s.World.GitHub.URL())
	fmt.Fprintf(out, "  kubeconfig       %s (runners in namespace %s)\n\n", s.World.Kube.KubeconfigPath, RunnerNamespace)
}

// watchProgress prints the pools' runners by state and the jobs done until every job has
// completed and every job's start has been recorded by its runner, or the timeout passes.
func (s *System) watchProgress(ctx context.Context, jobs []githubdouble.Job, opts Options) (int, error) {
	deadline := time.Now().Add(opts.Timeout)
	start := time.Now()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		done := s.jobsDone(jobs)
		recorded := len(s.latencies.Samples(workflows.MetricScaleUpPodCreated, burstPools...))
		fmt.Fprintf(opts.Out, "  %5.1fs  %s  jobs done %d/%d\n", time.Since(start).Seconds(), s.poolLine(ctx), done, len(jobs))
		if done == len(jobs) && recorded >= len(jobs) {
			return done, nil
		}
		if time.Now().After(deadline) {
			return done, fmt.Errorf("after %s, %d of %d jobs are done and %d job starts were recorded", opts.Timeout, done, len(jobs), recorded)
		}
		select {
		case <-ctx.Done():
			return done, ctx.Err()
		case <-tick.C:
		}
	}
}

func (s *System) jobsDone(jobs []githubdouble.Job) int {
	n := 0
	for _, j := range jobs {
		if cur, ok := s.World.GitHub.Job(j.ID); ok && cur.Status == githubdouble.StatusCompleted {
			n++
		}
	}
	return n
}

// poolLine is each pool's runners by state, from its status query.
func (s *System) poolLine(ctx context.Context) string {
	var parts []string
	for _, pool := range []string{orgPool, repoPool, scaleSetPool, pipelinePool} {
		st, err := poolcli.Status(ctx, s.Temporal, pool)
		if err != nil {
			parts = append(parts, pool+": (no status)")
			continue
		}
		var counts []string
		for _, state := range []workflows.RunnerState{workflows.RunnerPending, workflows.RunnerRegistering, workflows.RunnerIdle, workflows.RunnerBusy, workflows.RunnerDraining} {
			if n := st.RunnersByState[state]; n > 0 {
				counts = append(counts, fmt.Sprintf("%d %s", n, state))
			}
		}
		if len(counts) == 0 {
			counts = []string{"no runners"}
		}
		parts = append(parts, fmt.Sprintf("%s: %-30s", pool, strings.Join(counts, ", ")))
	}
	return strings.Join(parts, "  ")
}

// latencyReport gathers one sample per job and stage: the first two as the runner workflows
// recorded them, the last from GitHub's own job times.
func (s *System) latencyReport(jobs []githubdouble.Job) map[Stage][]time.Duration {
	out := map[Stage][]time.Duration{
		StagePodCreated:   s.latencies.Samples(workflows.MetricScaleUpPodCreated, burstPools...),
		StageRunnerOnline: s.latencies.Samples(workflows.MetricScaleUpRunnerOnline, burstPools...),
	}
	for _, j := range jobs {
		if cur, ok := s.World.GitHub.Job(j.ID); ok && cur.RunnerName != "" {
			out[StageJobStarted] = append(out[StageJobStarted], cur.StartedAt.Sub(cur.CreatedAt))
		}
	}
	return out
}

// burstTimes measures the burst by GitHub's own job times: from its queueing (every job's
// created_at) to its last job's completion, and to each pool's first job starting.
func (s *System) burstTimes(jobs []githubdouble.Job) (time.Duration, map[string]time.Duration) {
	if len(jobs) == 0 {
		return 0, nil
	}
	queued, last := jobs[0].CreatedAt, time.Time{}
	first := map[string]time.Duration{}
	for _, j := range jobs {
		cur, ok := s.World.GitHub.Job(j.ID)
		if !ok {
			continue
		}
		if cur.Status != githubdouble.StatusCompleted {
			last = time.Now()
		} else if cur.CompletedAt.After(last) {
			last = cur.CompletedAt
		}
		if cur.RunnerName == "" {
			continue
		}
		pool, d := poolFor(cur), cur.StartedAt.Sub(cur.CreatedAt)
		if prev, ok := first[pool]; !ok || d < prev {
			first[pool] = d
		}
	}
	return last.Sub(queued), first
}

// githubCalls is the worker's own count of GitHub API requests, from the registry.
func (s *System) githubCalls() int {
	families, err := s.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == "runnerflow_github_requests_total" {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return int(total)
}

func printSummary(out io.Writer, res Result, githubCalls int) {
	fmt.Fprintf(out, "\n%d of %d jobs done in %.1fs; the worker made %d GitHub API calls.\n",
		res.JobsCompleted, res.Jobs, res.Took.Seconds(), githubCalls)
	var firsts []string
	for _, pool := range []string{orgPool, repoPool, scaleSetPool} {
		if d, ok := res.FirstStarts[pool]; ok {
			firsts = append(firsts, fmt.Sprintf("%s %s", pool, seconds(d)))
		} else {
			firsts = append(firsts, pool+" none")
		}
	}
	fmt.Fprintf(out, "Each pool's first job started after: %s.\n", strings.Join(firsts, ", "))
	fmt.Fprintf(out, "From a job being queued to       p50      p95      max   samples\n")
	for _, st := range stages {
		d := res.Latencies[st]
		fmt.Fprintf(out, "  %-28s %6s   %6s   %6s   %d\n", st, seconds(percentile(d, 50)), seconds(percentile(d, 95)), seconds(percentile(d, 100)), len(d))
	}
	fmt.Fprintln(out, "Pod and online are what the runner workflows recorded in runnerflow_scale_up_*_seconds; online is the")
	fmt.Fprintln(out, "earliest evidence runnerflow had (a listing, or GitHub's started_at in whole seconds, never before the")
	fmt.Fprintln(out, "pod), so here, where the simulated runner connects at once, it reads as the pod's creation. Started is")
	fmt.Fprintln(out, "from GitHub's job times, which runnerflow_job_start_seconds gets in whole seconds.")
}

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of ds; zero for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func hasPool(pools []webhook.Pool, name string) bool {
	return slices.ContainsFunc(pools, func(p webhook.Pool) bool { return p.Name == name })
}
