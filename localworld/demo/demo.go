package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/internal/poolspec"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// PoolsYAML is the demo's pools file: an organization pool of ephemeral runners, a
// repository pool of persistent ones, an organization's runner scale set, and a pool that
// warms runners ahead of a pipeline's predicted jobs.
//
//go:embed pools.yaml
var PoolsYAML []byte

// The demo's GitHub: one organization with three repositories. Jobs of web need the large
// label, which only the web-large pool has; jobs asking for scaleset-linux go to the
// org-scaleset pool's set; the others go to org-linux.
const (
	demoOrg       = "demo-org"
	orgPool       = "org-linux"
	scaleSetPool  = "org-scaleset"
	repoPool      = "web-large"
	repoPoolRepo  = demoOrg + "/web"
	progressEvery = 2 * time.Second
)

var orgRepos = []string{demoOrg + "/app", demoOrg + "/api"}

// burstPools are the pools the burst's jobs go to (poolFor).
var burstPools = []string{orgPool, repoPool, scaleSetPool}

// Options configure Run.
type Options struct {
	// Jobs is the size of the burst; zero means 20.
	Jobs int
	// ExitWhenDone returns after the summary (and a check that the UI answers) instead of
	// keeping everything up until ctx ends.
	ExitWhenDone bool
	// Timeout bounds the wait for the burst to finish; zero means 5 minutes.
	Timeout time.Duration
	// WorkDuration is how long each simulated job runs; zero means 3 s.
	WorkDuration time.Duration
	// MetricsListen is where /metrics is served; empty means a free loopback port.
	MetricsListen string
	// Out receives progress and the summary; Logger the components' logs (nil discards).
	Out    io.Writer
	Logger *slog.Logger
}

// Result is what a bounded run measured.
type Result struct {
	UIAddress     string
	Jobs          int
	JobsCompleted int
	// UIStatus is the HTTP status the Temporal UI answered with (ExitWhenDone only).
	UIStatus int
	// Latencies hold one sample per job for each stage, from the job being queued.
	Latencies map[Stage][]time.Duration
	// Took is from the burst being queued to its last job completing, by GitHub's job times
	// (until the wait ended, if some job never completed).
	Took time.Duration
	// FirstStarts holds, for each pool that started a job, the time from the burst to the
	// first of its jobs starting.
	FirstStarts map[string]time.Duration
	// Prewarm is how the pipeline's build found its runner once the pool had learned it.
	Prewarm PrewarmResult
}

// Run is the demo: start everything, apply the pools, fire the burst, report progress and a
// summary, then keep the UI up until ctx ends (or return at once with ExitWhenDone).
func Run(ctx context.Context, opts Options) (Result, error) {
	opts = withDefaults(opts)
	fmt.Fprintln(opts.Out, "Starting the test world (Temporal with its UI, kube-apiserver, GitHub double, runner simulator), the worker and the webhook intake...")
	sys, err := Start(ctx, SystemConfig{UI: true, WorkDuration: opts.WorkDuration, MetricsListen: opts.MetricsListen, Logger: opts.Logger})
	if err != nil {
		return Result{}, err
	}
	defer sys.Stop()
	res := Result{UIAddress: sys.World.Temporal.UIAddress, Jobs: opts.Jobs}
	printAddresses(opts.Out, sys)
	// GitHub first, then the pools: a pool applied before its organization and repositories
	// exist has its first registrations refused with 404, which is not retried, and starts
	// no runner until its next attempt half a minute or more later.
	if err := sys.prepareGitHub(); err != nil {
		return res, err
	}
	if err := sys.pushPipeline(); err != nil {
		return res, err
	}
	if err := sys.ApplyPools(ctx, PoolsYAML, opts.Out); err != nil {
		return res, err
	}
	jobs, err := sys.fireBurst(opts.Jobs)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(opts.Out, "\nGitHub queued %d jobs (%d for %s, %d for %s, %d for %s); runnerflow scales up:\n",
		len(jobs), countFor(jobs, repoPool), repoPool, countFor(jobs, orgPool), orgPool, countFor(jobs, scaleSetPool), scaleSetPool)
	res.JobsCompleted, err = sys.watchProgress(ctx, jobs, opts)
	res.Latencies = sys.latencyReport(jobs)
	res.Took, res.FirstStarts = sys.burstTimes(jobs)
	printSummary(opts.Out, res, sys.githubCalls())
	if err != nil {
		return res, err
	}
	if res.Prewarm, err = sys.showPrewarm(ctx, opts.Timeout, opts.Out); err != nil {
		return res, err
	}
	if opts.ExitWhenDone {
		res.UIStatus, err = checkUI(ctx, res.UIAddress)
		fmt.Fprintf(opts.Out, "Temporal UI at %s answered %d.\n", res.UIAddress, res.UIStatus)
		return res, err
	}
	fmt.Fprintf(opts.Out, "\nEverything stays up: open the Temporal UI at %s (Ctrl-C stops the demo).\n", res.UIAddress)
	<-ctx.Done()
	return res, nil
}

func withDefaults(o Options) Options {
	if o.Jobs <= 0 {
		o.Jobs = 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.WorkDuration <= 0 {
		o.WorkDuration = 3 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

// ApplyPools validates a pools file and applies every pool, exactly as `starter apply -f`
// does, then waits until the intake can route to each of them (the pool table reads the
// pools' search attributes, which Temporal makes visible a moment after the start).
func (s *System) ApplyPools(ctx context.Context, yaml []byte, out io.Writer) error {
	specs, err := poolspec.Parse(yaml)
	if err != nil {
		return err
	}
	results, err := poolcli.Apply(ctx, s.Temporal, specs)
	for _, r := range results {
		fmt.Fprintf(out, "  applied %s: %s\n", workflows.PoolWorkflowID(r.Pool), r.Result)
	}
	if err != nil {
		return err
	}
	var names []string
	for _, spec := range specs {
		names = append(names, spec.Name)
	}
	return s.waitRoutable(ctx, names)
}

func (s *System) waitRoutable(ctx context.Context, names []string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if err := s.Intake.Pools().Refresh(ctx); err != nil {
			return err
		}
		missing := names[:0:0]
		for _, n := range names {
			if !hasPool(s.Intake.Pools().Pools(), n) {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pools %v never became routable", missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// prepareGitHub creates the demo organization's repositories at the double.
func (s *System) prepareGitHub() error {
	for _, repo := range append([]string{repoPoolRepo}, orgRepos...) {
		if err := s.World.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: repo}); err != nil {
			return err
		}
	}
	return nil
}

// fireBurst queues n jobs at once, every third for the repository pool, every third from the
// second on for the scale set, the rest for the organization pool. It starts on a
// whole second: GitHub's created_at (where runnerflow's latencies start) has whole seconds,
// so jobs queued just after one read as queued at it, and the measured latencies are exact.
func (s *System) fireBurst(n int) ([]githubdouble.Job, error) {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	var jobs []githubdouble.Job
	for i := range n {
		spec := githubdouble.JobSpec{Repository: orgRepos[i%len(orgRepos)], Labels: []string{"self-hosted", "linux"}, Name: fmt.Sprintf("build-%d", i+1)}
		switch i % 3 {
		case 1:
			spec = githubdouble.JobSpec{Repository: orgRepos[i%len(orgRepos)], Labels: []string{"scaleset-linux"}, Name: fmt.Sprintf("lint-%d", i+1)}
		case 2:
			spec = githubdouble.JobSpec{Repository: repoPoolRepo, Labels: []string{"self-hosted", "linux", "large"}, Name: fmt.Sprintf("e2e-%d", i+1)}
		}
		j, err := s.World.GitHub.QueueJob(spec)
		if err != nil {
			return jobs, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// countFor counts the jobs meant for pool.
func countFor(jobs []githubdouble.Job, pool string) int {
	n := 0
	for _, j := range jobs {
		if poolFor(j) == pool {
			n++
		}
	}
	return n
}

// poolFor is the pool a demo job is meant for, by its labels.
func poolFor(j githubdouble.Job) string {
	switch {
	case slices.Contains(j.Labels, "large"):
		return repoPool
	case slices.Contains(j.Labels, "scaleset-linux"):
		return scaleSetPool
	}
	return orgPool
}

// checkUI fetches the Temporal UI's front page.
func checkUI(ctx context.Context, address string) (int, error) {
	if address == "" {
		return 0, errors.New("the Temporal UI is off")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("temporal UI: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// uiLink is the UI's workflow list filtered by a visibility query.
func uiLink(ui, namespace, query string) string {
	return ui + "/namespaces/" + namespace + "/workflows?query=" + url.QueryEscape(query)
}
