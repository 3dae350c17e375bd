package main

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// fleetRestIntervals is how many rest listing intervals the rest window spans: it starts just
// after a listing, so it holds exactly this many.
const fleetRestIntervals = 2

// fleetPhase is --pools N --workers R: N pools in one organization with --pool-runners
// runners each, served by R worker replicas, measured at rest and through a burst.
type fleetPhase struct {
	e     *env
	org   string
	scope workflows.Scope
	ns    string
	pools []string
	res   FleetResult
}

// fleet runs the phase: start the extra worker replicas, bring every pool to its runners, then
// measure a rest window and a burst, and clean up (the pools, their runners, the replicas).
func (e *env) fleet(ctx context.Context) (_ FleetResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.PhaseTimeout)
	defer cancel()
	f := &fleetPhase{e: e, org: "org-fleet"}
	f.scope = workflows.Scope{Organization: f.org}
	f.res = FleetResult{Pools: e.opts.Pools, RunnersPerPool: e.opts.PoolRunners, Workers: e.opts.Workers, Jobs: e.opts.PoolJobs}
	stop, err := e.startReplicas(e.opts.Workers - 1)
	defer stop()
	if err != nil {
		return f.res, err
	}
	defer f.tearDown()
	began := time.Now()
	if err := f.setUp(ctx); err != nil {
		return f.res, err
	}
	if err := f.waitSteady(ctx, "every pool's runners online"); err != nil {
		return f.res, err
	}
	f.res.UpSeconds = round1(time.Since(began).Seconds())
	e.say("fleet: %d pools × %d runners online after %.0fs; measuring %d rest intervals", len(f.pools), e.opts.PoolRunners, f.res.UpSeconds, fleetRestIntervals)
	if f.res.Rest, err = f.rest(ctx); err != nil {
		return f.res, err
	}
	e.say("fleet: burst of %d jobs", e.opts.PoolJobs)
	if f.res.Burst, err = f.burst(ctx); err != nil {
		return f.res, err
	}
	f.res.Before = f.before()
	return f.res, nil
}

// startReplicas starts n more in-process worker replicas beside the benchmark's own, each with
// its own Temporal client and pod watcher (which stands by unless it holds the Lease).
func (e *env) startReplicas(n int) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for i := range n {
		kube, err := clientcmd.BuildConfigFromFlags("", e.world.Kube.KubeconfigPath)
		if err != nil {
			return stop, fmt.Errorf("replica kubeconfig: %w", err)
		}
		app, err := workerapp.New(workerapp.Config{
			TemporalAddress: e.world.Temporal.Address, Namespace: e.world.Temporal.Namespace,
			Kube: e.writes.Wrap(kube), KubeQPS: float32(e.opts.KubeQPS), KubeBurst: e.opts.kubeBurst(),
			GitHub:                activities.GitHubConfig{BaseURL: e.world.GitHub.URL(), Token: e.world.GitHubToken},
			GitHubPointsPerMinute: e.opts.GitHubPointsPerMinute,
			Logger:                e.log, Identity: fmt.Sprintf("bench-replica-%d", i+2),
		})
		if err != nil {
			return stop, fmt.Errorf("replica %d: %w", i+2, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		stops = append(stops, func() {
			cancel()
			if err := <-done; err != nil {
				e.log.Warn("replica stopped with an error", "error", err)
			}
		})
	}
	return stop, nil
}

func (f *fleetPhase) setUp(ctx context.Context) error {
	ns, err := f.e.newNamespace(ctx, "fleet")
	if err != nil {
		return err
	}
	f.ns = ns
	if err := f.e.world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: f.org + "/app"}); err != nil {
		return err
	}
	var specs []workflows.PoolSpec
	for i := range f.e.opts.Pools {
		name := fmt.Sprintf("fleet-%02d", i)
		f.pools = append(f.pools, name)
		specs = append(specs, poolSpec(name, f.org, ns, f.e.opts.PoolRunners, f.e.opts.PoolRunners))
	}
	if err := f.e.apply(ctx, specs...); err != nil {
		return err
	}
	return f.e.intake.waitRoutable(ctx, f.pools...)
}

// waitSteady waits until every pool has all its runners idle and none registering, and the
// scope's listing is back at its rest interval.
func (f *fleetPhase) waitSteady(ctx context.Context, what string) error {
	return pollEvery(ctx, 5*time.Second, what, func() (bool, error) {
		for _, p := range f.pools {
			st, err := f.e.status(ctx, p)
			if err != nil {
				return false, err
			}
			if st.RunnersByState[workflows.RunnerIdle] != f.e.opts.PoolRunners || len(st.Runners) != f.e.opts.PoolRunners {
				return false, nil
			}
		}
		st, err := f.listingState(ctx)
		if err != nil {
			return false, nil // not started yet
		}
		for _, p := range st.Pools {
			if time.Now().Before(p.FastUntil) {
				return false, nil
			}
		}
		return true, nil
	})
}

func (f *fleetPhase) listingState(ctx context.Context) (workflows.ScopeListingState, error) {
	var st workflows.ScopeListingState
	v, err := f.e.c.QueryWorkflow(ctx, workflows.ScopeListingWorkflowID(f.scope), "", workflows.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// rest measures fleetRestIntervals rest intervals, starting just after a listing.
func (f *fleetPhase) rest(ctx context.Context) (FleetWindow, error) {
	st, err := f.listingState(ctx)
	if err != nil {
		return FleetWindow{}, err
	}
	n0 := st.Listings
	if err := pollEvery(ctx, time.Second, "a scope listing", func() (bool, error) {
		st, err := f.listingState(ctx)
		return err == nil && st.Listings > n0, nil
	}); err != nil {
		return FleetWindow{}, err
	}
	time.Sleep(5 * time.Second)
	start := f.reset(ctx)
	select {
	case <-ctx.Done():
		return FleetWindow{}, ctx.Err()
	case <-time.After(fleetRestIntervals * workflows.PoolListingInterval):
	}
	return f.window(ctx, start)
}

// burst queues the jobs (each takes an idle runner; each ephemeral runner that ran one is
// replaced, so runners register throughout) and measures until every job ran and every pool is
// back to its runners idle.
func (f *fleetPhase) burst(ctx context.Context) (FleetWindow, error) {
	start := f.reset(ctx)
	gh := f.e.world.GitHub
	var jobs []int64
	gh.HoldWebhooks()
	for range f.e.opts.PoolJobs {
		j, err := gh.QueueJob(githubdouble.JobSpec{Repository: f.org + "/app", Labels: jobLabels})
		if err != nil {
			gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
			return FleetWindow{}, err
		}
		jobs = append(jobs, j.ID)
	}
	gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
	if err := pollEvery(ctx, time.Second, "every burst job to complete", func() (bool, error) {
		for _, id := range jobs {
			if j, ok := gh.Job(id); !ok || j.Status != githubdouble.StatusCompleted {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return FleetWindow{}, err
	}
	if err := f.waitSteady(ctx, "every pool's runners replaced and online"); err != nil {
		return FleetWindow{}, err
	}
	return f.window(ctx, start)
}

// fleetMark is where a window began: the time and the listing workflow's counters.
type fleetMark struct {
	at                time.Time
	listings, signals int64
}

func (f *fleetPhase) reset(ctx context.Context) fleetMark {
	f.e.world.GitHub.ResetCalls()
	f.e.writes.Reset()
	st, _ := f.listingState(ctx)
	return fleetMark{at: time.Now(), listings: st.Listings, signals: st.Signals}
}

// window reads a window's figures: the GitHub calls since the mark, the scope's listings and
// its signals to pools, the pool and listing workflows' actions, and the signals runner
// workflows received.
func (f *fleetPhase) window(ctx context.Context, m fleetMark) (FleetWindow, error) {
	secs := time.Since(m.at).Seconds()
	gh := f.e.world.GitHub
	w := FleetWindow{Seconds: round1(secs), GitHubCalls: gh.TotalCalls(), ListingCalls: gh.CallCount("GET /orgs/{org}/actions/runners")}
	w.GitHubCallsPerHour = round1(float64(w.GitHubCalls) * 3600 / secs)
	w.ListingCallsPerHour = round1(float64(w.ListingCalls) * 3600 / secs)
	st, err := f.listingState(ctx)
	if err != nil {
		return w, err
	}
	w.Listings, w.PoolSignals = int(st.Listings-m.listings), int(st.Signals-m.signals)
	w.PagesPerListing = ratio(w.ListingCalls, w.Listings)
	query := idQuery(workflows.PoolWorkflowID, f.pools) + fmt.Sprintf(" OR WorkflowId = %q", workflows.ScopeListingWorkflowID(f.scope))
	cost, err := historyCost(ctx, f.e.c, query, m.at, nil)
	if err != nil {
		return w, err
	}
	w.PoolActions = cost.Actions.Total()
	w.PoolActionsPerHour = round1(float64(w.PoolActions) * 3600 / secs)
	w.Runners, err = f.runnerSignals(ctx, m.at)
	return w, err
}

// runnerSignals counts the signals the fleet's runner workflows received since since: the pod
// watcher's per pod transition (a transition is one pod's distinct status; a second signal of
// the same status is a duplicate), and their pools' listing news.
func (f *fleetPhase) runnerSignals(ctx context.Context, since time.Time) (FleetRunnerSignals, error) {
	runs, err := listRuns(ctx, f.e.c, f.runnerQuery())
	if err != nil {
		return FleetRunnerSignals{}, err
	}
	var (
		mu    sync.Mutex
		out   FleetRunnerSignals
		first error
		wg    sync.WaitGroup
	)
	transitions := map[string]bool{}
	sem := make(chan struct{}, 8)
	dc := converter.GetDefaultDataConverter()
	for _, r := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			events, err := fetchHistory(ctx, f.e.c, r.id, r.runID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, err)
				return
			}
			for _, ev := range events {
				attrs := ev.GetWorkflowExecutionSignaledEventAttributes()
				if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED || ev.GetEventTime().AsTime().Before(since) {
					continue
				}
				switch attrs.GetSignalName() {
				case workflows.SignalPodStatus:
					var s workflows.PodStatusSignal
					_ = dc.FromPayloads(attrs.GetInput(), &s)
					out.PodSignals++
					transitions[fmt.Sprintf("%s/%s/%s/%s/%t", r.id, s.UID, s.Phase, s.Reason, s.Deleting)] = true
				case workflows.SignalRunnerStatus:
					out.StatusSignals++
				}
			}
		})
	}
	wg.Wait()
	err = first
	out.PodTransitions = len(transitions)
	out.PodSignalsPerTransition = ratio(out.PodSignals, out.PodTransitions)
	return out, err
}

func (f *fleetPhase) runnerQuery() string {
	return fmt.Sprintf("WorkflowType = %q AND %s", workflows.RunnerWorkflowType, poolQuery(f.pools))
}

// before is what the same fleet cost with each pool listing its scope itself (the code before
// changeSharedListing): every pool lists every page of the organization, every 2 min at rest
// and every 15 s while one of its runners registers; each listing is one activity and the
// pool's wake-up timer.
func (f *fleetPhase) before() FleetBefore {
	pages := f.res.Rest.PagesPerListing
	if pages == 0 {
		pages = float64((f.e.opts.Pools*f.e.opts.PoolRunners + 99) / 100)
	}
	perHour := func(interval time.Duration) float64 { return float64(time.Hour / interval) }
	n := float64(f.e.opts.Pools)
	return FleetBefore{
		PagesPerListing:         pages,
		RestListingCallsPerHour: round1(n * pages * perHour(workflows.PoolListingInterval)),
		BurstListingCallsPerHr:  round1(n * pages * perHour(workflows.PoolListingIntervalStarting)),
		RestListingActionsPerHr: round1(n * 2 * perHour(workflows.PoolListingInterval)),
	}
}

// tearDown ends the pools, their runner workflows and the scope's listing, and removes the
// namespace with its pods and Secrets: a thousand idle runners would slow every later phase.
func (f *fleetPhase) tearDown() {
	ctx := context.Background()
	f.e.terminatePools(ctx, f.pools...)
	_ = f.e.c.TerminateWorkflow(ctx, workflows.ScopeListingWorkflowID(f.scope), "", "benchmark phase over")
	if runs, err := listRuns(ctx, f.e.c, f.runnerQuery()+` AND ExecutionStatus = "Running"`); err == nil {
		for _, r := range runs {
			_ = f.e.c.TerminateWorkflow(ctx, r.id, "", "benchmark phase over")
		}
	}
	if f.ns != "" {
		_ = f.e.world.Kubernetes.CoreV1().Namespaces().Delete(ctx, f.ns, metav1.DeleteOptions{})
	}
}
