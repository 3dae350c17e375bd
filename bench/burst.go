package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/kubewrites"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	// burstPools is how many pools a burst's jobs are spread over.
	burstPools = 2
	// actionQueued and actionCompleted are the workflow_job webhook actions of a newly queued
	// job and of a finished one.
	actionQueued    = "queued"
	actionCompleted = "completed"
)

// burstPhase is one burst of queued jobs and what it left behind to measure.
type burstPhase struct {
	e     *env
	n     int
	pools []string
	jobs  []int64
	// start is when the counters were reset, just before the jobs were queued; released is
	// when the double started sending their webhooks.
	start, released, allStarted time.Time
	// warm is how many warm registrations the pools held when the jobs were queued; hotPath
	// and refills count the registrations runner workflows and pools made between the first
	// webhook and the last job start (see BurstResult).
	warm, hotPath, refills int
	// scaleSet makes the pools scale-set pools, told of their jobs by their sets' listeners
	// rather than by webhooks (bench/scaleset_burst.go); offers has the service offer the sets
	// their jobs, to be acquired, rather than assign them; setIDs are the sets.
	scaleSet, offers bool
	setIDs           []int64
	// operator is what an operator felt from the first webhook to the last job started.
	operator OperatorResult
}

// burst measures figures 1–4: n jobs queued at once across two fresh pools (webhooks held,
// then released in order: the double sends them to the intake as fast as its delivery workers
// go), until every job ran and every runner was cleaned up.
func (e *env) burst(ctx context.Context, n int) (BurstResult, error) {
	return e.runBurst(ctx, &burstPhase{e: e, n: n})
}

// runBurst runs one burst phase b (webhook or scale-set pools) and measures it.
func (e *env) runBurst(ctx context.Context, b *burstPhase) (_ BurstResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.PhaseTimeout)
	defer cancel()
	n := b.n
	defer func() {
		if err != nil {
			b.abandon()
		}
		e.terminatePools(context.Background(), b.pools...)
	}()
	if err := b.setUp(ctx); err != nil {
		return BurstResult{}, err
	}
	e.say("burst of %d jobs across %d pools: queueing", n, len(b.pools))
	e.intake.answers.reset()
	stopProfile, err := burstCPUProfile(e.opts.CPUProfile, n)
	if err != nil {
		return BurstResult{}, err
	}
	probe := e.probeStatus(ctx, b.pools)
	if err := b.fire(); err != nil {
		probe.stop()
		_ = stopProfile()
		return BurstResult{}, err
	}
	err = b.waitStarted(ctx)
	if perr := stopProfile(); perr != nil && err == nil {
		err = perr
	}
	b.operator.StatusQuery, b.operator.StatusQueryFailures = probe.stop()
	b.operator.Deliveries, b.operator.Answered503 = e.intake.answers.total(), e.intake.answers.of(http.StatusServiceUnavailable)
	if err != nil {
		return BurstResult{}, err
	}
	e.say("burst of %d: every job started %.1fs after the first webhook; waiting for the runners to finish", n, b.allStarted.Sub(b.released).Seconds())
	if err := b.waitSettled(ctx); err != nil {
		return BurstResult{}, err
	}
	stranded, err := b.endStranded(ctx)
	if err != nil {
		return BurstResult{}, err
	}
	end := time.Now()
	e.say("burst of %d: settled after %.1fs (%d runner workflows stranded); reading histories", n, end.Sub(b.released).Seconds(), len(stranded))
	res, err := b.measure(ctx, end)
	res.Stranded = stranded
	return res, err
}

// setUp creates the namespace, the repositories at the double and the pools, and waits until
// the intake routes to them.
func (b *burstPhase) setUp(ctx context.Context) error {
	ns, err := b.e.newNamespace(ctx, fmt.Sprintf("burst-%d", b.n))
	if err != nil {
		return err
	}
	var specs []workflows.PoolSpec
	for i := range burstPools {
		pool := fmt.Sprintf("%sburst%d-%c", b.prefix(), b.n, 'a'+i)
		org := burstOrg(pool)
		if err := b.e.world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
			return err
		}
		b.pools = append(b.pools, pool)
		spec := poolSpec(pool, org, ns, 0, min(b.n, workflows.MaxPoolReplicas))
		spec.WarmRegistrations = warmShares(b.e.opts.Warm, b.n, burstPools)[i]
		if b.scaleSet {
			// A scale-set pool takes no warm registrations (its runners get their
			// configurations from the set): these bursts stay cold whatever --warm says.
			spec.ScaleSet, spec.WarmRegistrations = &workflows.ScaleSetSpec{}, 0
		}
		if b.offers {
			b.e.offerJobs(pool)
		}
		specs = append(specs, spec)
	}
	if err := b.e.apply(ctx, specs...); err != nil {
		return err
	}
	if b.scaleSet {
		return b.waitListening(ctx)
	}
	if err := b.e.intake.waitRoutable(ctx, b.pools...); err != nil {
		return err
	}
	return b.waitWarm(ctx)
}

// waitWarm waits until every pool has minted its warm registrations (none when cold).
func (b *burstPhase) waitWarm(ctx context.Context) error {
	if b.e.opts.Warm == 0 {
		return nil
	}
	start, shares := time.Now(), warmShares(b.e.opts.Warm, b.n, burstPools)
	err := pollEvery(ctx, time.Second, "the warm registrations to be minted", func() (bool, error) {
		b.warm = 0
		for i, p := range b.pools {
			if shares[i] == 0 {
				continue
			}
			st, err := b.e.status(ctx, p)
			if err != nil {
				return false, err
			}
			if st.WarmWanted == 0 || st.WarmReady < st.WarmWanted {
				return false, nil
			}
			b.warm += st.WarmReady
		}
		return true, nil
	})
	if err == nil {
		b.e.say("burst of %d: %d warm registrations minted in %.1fs", b.n, b.warm, time.Since(start).Seconds())
	}
	return err
}

// fire resets the counters and queues the jobs with webhooks held, then releases them.
func (b *burstPhase) fire() error {
	b.e.writes.Reset()
	b.e.world.GitHub.ResetCalls()
	b.start = time.Now()
	var err error
	b.jobs, b.released, err = queueBurst(b.e.world.GitHub, b.pools, b.n)
	return err
}

// queueBurst queues n jobs spread over the pools' organizations with the double's webhooks
// held, then releases them in order, so every system measured gets the same burst at once. It
// returns the jobs and when their webhooks were released.
func queueBurst(gh *githubdouble.Server, pools []string, n int) ([]int64, time.Time, error) {
	var jobs []int64
	gh.HoldWebhooks()
	for i := range n {
		org := burstOrg(pools[i%len(pools)])
		j, err := gh.QueueJob(githubdouble.JobSpec{Repository: org + "/app", Labels: jobLabels})
		if err != nil {
			gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
			return jobs, time.Time{}, err
		}
		jobs = append(jobs, j.ID)
	}
	released := time.Now()
	gh.ReleaseWebhooks(githubdouble.ReleaseInOrder)
	return jobs, released, nil
}

func (b *burstPhase) measure(ctx context.Context, end time.Time) (BurstResult, error) {
	res := BurstResult{Jobs: b.n, Pools: len(b.pools), Seconds: round1(end.Sub(b.released).Seconds())}
	runners, err := listRuns(ctx, b.e.c, b.runnerQuery())
	if err != nil {
		return res, err
	}
	res.Runners = distinctWorkflows(runners)
	decided := map[string]time.Time{}
	if res.Temporal, err = b.temporalCost(ctx, res.Runners, decided); err != nil {
		return res, err
	}
	res.Temporal.ActionsPerJob = ratio(res.Temporal.total().Actions.Total(), b.n)
	res.GitHub = githubCost(b.e.world.GitHub, res.Runners, b.n)
	if b.scaleSet {
		res.Mode, res.ActionsService = b.mode(), actionsServiceCost(b.e.world.GitHub, res.Runners, b.n)
	}
	res.Warm, res.HotPathRegistrations, res.WarmRefills = b.warm, b.hotPath, b.refills
	res.Kubernetes = kubernetesCost(b.e.writes, res.Runners, b.n)
	res.Operator = b.operator
	res.Latency, err = b.latencies(runnerTimes{decided: decided, started: firstStarts(runners)})
	return res, err
}

// runnerTimes are, per runner name, when its pool decided to start it and when its workflow
// started.
type runnerTimes struct{ decided, started map[string]time.Time }

// latencies pairs, per job, the intake's arrival time of its queued webhook with its pool's
// decision to start its runner (the pool's history), its runner's workflow start (Temporal's
// visibility record), pod create call (the worker's counted writes),
// coming online (the simulator) and starting the job (the double's job record). The runner is
// the one that ran the job, found by name: one name serves as workflow id suffix, pod name and
// GitHub runner name.
func (b *burstPhase) latencies(rt runnerTimes) (LatencyResult, error) {
	queued := map[int64]string{}
	for _, d := range b.e.world.GitHub.Deliveries() {
		if d.Action == actionQueued && queued[d.JobID] == "" {
			queued[d.JobID] = d.ID
		}
	}
	podCreated := map[string]time.Time{}
	for _, w := range b.e.writes.Writes() {
		if w.Key == (kubewrites.Key{Verb: kubewrites.Create, Resource: "pods"}) && w.Status/100 == 2 {
			podCreated[w.Name] = w.At
		}
	}
	var toDecided, toWorkflow, toPod, toOnline, toStarted, queuedToStarted []time.Duration
	for _, id := range b.jobs {
		j, _ := b.e.world.GitHub.Job(id)
		queuedToStarted = append(queuedToStarted, j.StartedAt.Sub(j.CreatedAt))
		received, ok := b.e.intake.receivedAt(queued[id])
		if b.scaleSet {
			// No webhook: the job's clock starts when the double queued it.
			received, ok = j.CreatedAt, true
		}
		if !ok {
			return LatencyResult{}, fmt.Errorf("job %d: its queued webhook never reached the intake", id)
		}
		decided, ok := rt.decided[j.RunnerName]
		if !ok {
			return LatencyResult{}, fmt.Errorf("job %d: no pool started its runner %q", id, j.RunnerName)
		}
		started, ok := rt.started[j.RunnerName]
		if !ok {
			return LatencyResult{}, fmt.Errorf("job %d: no runner workflow found for its runner %q", id, j.RunnerName)
		}
		created, ok := podCreated[j.RunnerName]
		if !ok {
			return LatencyResult{}, fmt.Errorf("job %d: no pod create call recorded for its runner %q", id, j.RunnerName)
		}
		online, ok := b.e.online.at(j.RunnerName)
		if !ok {
			return LatencyResult{}, fmt.Errorf("job %d: runner %q was never seen coming online", id, j.RunnerName)
		}
		toDecided = append(toDecided, decided.Sub(received))
		toWorkflow = append(toWorkflow, started.Sub(received))
		toPod = append(toPod, created.Sub(received))
		toOnline = append(toOnline, online.Sub(received))
		toStarted = append(toStarted, j.StartedAt.Sub(received))
	}
	return LatencyResult{
		ToPoolDecision: summarize(toDecided), ToRunnerWorkflow: summarize(toWorkflow), ToPodCreate: summarize(toPod), ToOnline: summarize(toOnline), ToStarted: summarize(toStarted),
		QueuedToStarted:       summarize(queuedToStarted),
		AllStartedSeconds:     round1(b.allStarted.Sub(b.released).Seconds()),
		SecondaryLimitSeconds: round1(secondaryLimitSeconds(b.n, b.e.opts.GitHubPointsPerMinute)),
	}, nil
}

// secondaryLimitSeconds is how long GitHub's secondary limit (pointsPerMinute; a registration
// is a write of workflows.GitHubWritePoints) takes to admit one registration per job.
func secondaryLimitSeconds(jobs, pointsPerMinute int) float64 {
	if pointsPerMinute <= 0 {
		return 0
	}
	return float64(jobs*workflows.GitHubWritePoints) / float64(pointsPerMinute) * 60
}

// temporalCost counts the burst's histories, and notes in decided when each pool decided to
// start a runner (the pool's child workflow initiation, by runner name).
func (b *burstPhase) temporalCost(ctx context.Context, runners int, decided map[string]time.Time) (TemporalResult, error) {
	var res TemporalResult
	var err error
	// A registration in the burst's hot window (first webhook to last job start) is a job's
	// runner waiting on GitHub when a runner workflow makes it, a warm refill when a pool does.
	registrations := func(n *int) func(*historypb.HistoryEvent) {
		return func(ev *historypb.HistoryEvent) {
			at := ev.GetEventTime().AsTime()
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityRegisterRunner &&
				!at.Before(b.released) && !at.After(b.allStarted) {
				*n++
			}
		}
	}
	b.hotPath, b.refills = 0, 0
	countHotPath, podPath := registrations(&b.hotPath), newPodPathTracer()
	visitRunner := func(ev *historypb.HistoryEvent) {
		countHotPath(ev)
		podPath.visit(ev)
	}
	if res.RunnerWorkflows, err = historyCost(ctx, b.e.c, b.runnerQuery(), b.start, visitRunner); err != nil {
		return res, err
	}
	b.operator.PodPath = podPath.result()
	countRefill := registrations(&b.refills)
	// The pools' and windows' histories also show where their time went (DeciderTrace).
	poolTrace, windowTrace := newDeciderTracer(b.released, b.allStarted), newDeciderTracer(b.released, b.allStarted)
	if path := b.e.opts.DeciderTimeline; path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return res, fmt.Errorf("decider timeline: %w", err)
		}
		defer f.Close()
		fmt.Fprintf(f, "# burst of %d jobs (%s), pools' histories from %s\n", b.n, cmp.Or(b.mode(), "webhooks"), b.released.Format(time.RFC3339Nano))
		poolTrace.timeline = f
	}
	// A pool decides to start a runner when it issues the runner's start: a child workflow
	// (before changeStartInBatches), or its place in a StartRunnerWorkflows batch.
	noteDecision := func(ev *historypb.HistoryEvent) {
		countRefill(ev)
		poolTrace.visit(ev)
		at := ev.GetEventTime().AsTime()
		if id := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowId(); id != "" {
			decided[runnerName(id)] = at
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == workflows.ActivityStartRunnerWorkflows {
			var in workflows.StartRunnerWorkflowsInput
			if converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in) == nil {
				for _, r := range in.Runners {
					decided[r.Name] = at
				}
			}
		}
	}
	if res.PoolWorkflows, err = historyCost(ctx, b.e.c, idQuery(workflows.PoolWorkflowID, b.pools), b.start, noteDecision); err != nil {
		return res, err
	}
	if res.ScaleWindows, err = historyCost(ctx, b.e.c, b.windowQuery(), b.start, windowTrace.visit); err != nil {
		return res, err
	}
	b.operator.PoolTasks, b.operator.WindowTasks = poolTrace.result(), windowTrace.result()
	if res.ScopeListings, err = historyCost(ctx, b.e.c, b.listingQuery(), b.start, nil); err != nil {
		return res, err
	}
	if b.scaleSet {
		listenerTrace := newDeciderTracer(b.released, b.allStarted)
		if res.Listeners, err = historyCost(ctx, b.e.c, b.listenerQuery(), b.start, listenerTrace.visit); err != nil {
			return res, err
		}
		b.operator.ListenerTasks = listenerTrace.result()
	}
	all := res.total()
	res.EventsPerRunner = ratio(all.Events, runners)
	res.ActionsPerRunner = ratio(all.Actions.Total(), runners)
	res.RunnerOnlyActionsPerRunner = ratio(res.RunnerWorkflows.Actions.Total(), runners)
	return res, nil
}

// total is the cost of the runner, pool and scale-window workflows together.
func (t TemporalResult) total() HistoryCost {
	var all HistoryCost
	all.add(t.RunnerWorkflows)
	all.add(t.PoolWorkflows)
	all.add(t.ScaleWindows)
	all.add(t.ScopeListings)
	all.add(t.Listeners)
	return all
}

func (b *burstPhase) runnerQuery() string {
	return fmt.Sprintf("WorkflowType = %q AND %s", workflows.RunnerWorkflowType, poolQuery(b.pools))
}

// poolQuery matches workflows whose RunnerPool search attribute is one of the pools.
func poolQuery(pools []string) string {
	var parts []string
	for _, p := range pools {
		parts = append(parts, fmt.Sprintf("RunnerPool = %q", p))
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

func (b *burstPhase) windowQuery() string { return idQuery(workflows.ScaleWindowWorkflowID, b.pools) }

// listingQuery matches the listing workflows of the pools' scopes (one organization each).
func (b *burstPhase) listingQuery() string {
	return idQuery(func(pool string) string {
		return workflows.ScopeListingWorkflowID(workflows.Scope{Organization: burstOrg(pool)})
	}, b.pools)
}

// burstOrg is the organization a burst pool serves.
func burstOrg(pool string) string { return "org-" + pool }

// idQuery matches every run of the workflows whose ids id derives from the pools.
func idQuery(id func(string) string, pools []string) string {
	var parts []string
	for _, p := range pools {
		parts = append(parts, fmt.Sprintf("WorkflowId = %q", id(p)))
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// runnerName is the last part of a runner workflow id (runner/<pool>/<name>).
func runnerName(workflowID string) string { return workflowID[strings.LastIndex(workflowID, "/")+1:] }

// firstStarts maps runner names to their first run's start.
func firstStarts(runs []executionRef) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range runs {
		name := runnerName(r.id)
		if t, ok := out[name]; !ok || r.started.Before(t) {
			out[name] = r.started
		}
	}
	return out
}

func distinctWorkflows(runs []executionRef) int {
	ids := map[string]bool{}
	for _, r := range runs {
		ids[r.id] = true
	}
	return len(ids)
}

// githubCost is figure 2 from the double's counters since the last reset.
func githubCost(gh *githubdouble.Server, runners, jobs int) GitHubResult {
	res := GitHubResult{Calls: gh.TotalCalls(), ByEndpoint: map[string]int{}}
	for k, v := range gh.Calls() {
		res.ByEndpoint[fmt.Sprintf("%s %d", k.Route, k.Status)] += v
	}
	res.PerRunner = ratio(res.Calls, runners)
	res.PerJob = ratio(res.Calls, jobs)
	return res
}

// kubernetesCost is figure 4 from the worker's counted writes since the last reset.
func kubernetesCost(w *kubewrites.Counter, runners, jobs int) KubernetesResult {
	res := KubernetesResult{ByKind: map[string]int{}}
	for k, v := range w.Counts() {
		res.ByKind[k.String()] = v
		// The elected pod watcher renews its Lease every few seconds whatever the runners
		// do: a cost per second of the burst, listed apart from the writes per runner.
		if k.Resource == "leases" {
			res.LeaseWrites += v
			continue
		}
		res.Writes += v
	}
	res.PerRunner = ratio(res.Writes, runners)
	res.PerJob = ratio(res.Writes, jobs)
	return res
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
