package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The pipelines phase (--pipelines N, issue 39): the same workflow runs, a graph of jobs with
// run times drawn from a seeded distribution, through two pools at once, one that predicts
// (prewarm on) and one that does not. Each pool first learns the workflow from
// PrewarmMinSamples runs; then N runs per pool, started a few seconds apart, are measured:
// how long the downstream jobs (those with needs) waited from queued to started, the runner
// time spent beside the jobs' own, and the GitHub calls prediction made per run.

// pipelineFile is the measured workflow: lint and test, then build, then a 4-way matrix
// deploy, as issue 39's acceptance names it.
const pipelineFile = `name: CI
on: push
jobs:
  lint:
    runs-on: [self-hosted, pipelines]
    steps: [{run: make lint}]
  test:
    runs-on: [self-hosted, pipelines]
    steps: [{run: make test}]
  build:
    needs: [lint, test]
    runs-on: [self-hosted, pipelines]
    steps: [{run: make build}]
  deploy:
    needs: build
    runs-on: [self-hosted, pipelines]
    strategy: {matrix: {region: [a, b, c, d]}}
    steps: [{run: make deploy}]
`

const pipelinePath = ".github/workflows/ci.yml"

// pipelineLabels route the pipelines' jobs to the phase's pools only.
var pipelineLabels = []string{"self-hosted", "pipelines"}

// pipelineJobTimes are each job's typical run time; a run's are each drawn uniformly within
// ±pipelineJobSpread of it.
var pipelineJobTimes = map[string]time.Duration{
	"lint": 20 * time.Second, "test": 30 * time.Second, "build": 20 * time.Second, "deploy": 10 * time.Second,
}

const (
	pipelineJobSpread = 0.25
	// pipelineSpacing is the time between two measured runs' starts.
	pipelineSpacing = 4 * time.Second
	// pipelineSettle bounds the wait, after the last run, for the pools' runners to be gone:
	// a runner warmed for a job that never came leaves after the prewarm grace (2 min).
	pipelineSettle = 4 * time.Minute
)

// PipelinesResult is the pipelines phase.
type PipelinesResult struct {
	Runs int         `json:"runs"`
	Seed uint64      `json:"seed"`
	On   PipelineArm `json:"on"`
	Off  PipelineArm `json:"off"`
}

// PipelineArm is one pool's measured runs.
type PipelineArm struct {
	Pool    string `json:"pool"`
	Prewarm bool   `json:"prewarm"`
	// Downstream is the queued → started wait of the jobs with needs (build and deploy);
	// Upstream that of lint and test, whose runners can only start when they are queued.
	Downstream Percentiles `json:"downstream"`
	Upstream   Percentiles `json:"upstream"`
	// Jobs and RunnersStarted: one runner a job is the rule.
	Jobs           int `json:"jobs"`
	RunnersStarted int `json:"runnersStarted"`
	// RunnerSeconds is the runner pods' lives, from creation to deletion; JobSeconds the jobs'
	// own run times; IdleShare the rest as a share of JobSeconds (a runner starting, waiting
	// for its job, leaving).
	RunnerSeconds float64 `json:"runnerSeconds"`
	JobSeconds    float64 `json:"jobSeconds"`
	IdleShare     float64 `json:"idleShare"`
	// GitHubCallsPerRun are the reads of runs and workflow files, per measured run.
	GitHubCallsPerRun float64 `json:"githubCallsPerRun"`
}

// pipelinePhase is one run of the phase.
type pipelinePhase struct {
	e    *env
	rng  *rand.Rand
	arms []*pipelineArm
	// work holds each job's run time, by run id and the file's job id.
	mu   sync.Mutex
	work map[int64]map[string]time.Duration
}

type pipelineArm struct {
	pool, org, ns string
	prewarm       bool
	runs          []int64
	pods          *podLives
}

// pipelines runs the phase.
func (e *env) pipelines(ctx context.Context) (_ PipelinesResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.PhaseTimeout)
	defer cancel()
	seed := e.opts.PipelineSeed
	p := &pipelinePhase{e: e, rng: rand.New(rand.NewPCG(seed, seed)), work: map[int64]map[string]time.Duration{}}
	e.jobWork.Store(p.jobWork)
	defer e.jobWork.Store(noJobWork)
	if err := p.setUp(ctx); err != nil {
		return PipelinesResult{}, err
	}
	defer func() {
		for _, a := range p.arms {
			e.terminatePools(context.Background(), a.pool)
		}
	}()
	learn := workflows.PrewarmMinSamples
	e.say("pipelines: %d runs per pool to learn the workflow", learn)
	for range learn {
		if err := p.startRuns(); err != nil {
			return PipelinesResult{}, err
		}
	}
	if err := p.waitRuns(ctx); err != nil {
		return PipelinesResult{}, err
	}
	// The measured runs start with no runner left: a pod still leaving would count as theirs.
	if err := p.waitNoRunners(ctx); err != nil {
		return PipelinesResult{}, err
	}
	before := map[string]int64{}
	for _, a := range p.arms {
		st, err := e.status(ctx, a.pool)
		if err != nil {
			return PipelinesResult{}, err
		}
		before[a.pool] = st.Totals.Started
		a.runs = nil
		if a.pods, err = watchPodLives(ctx, e, a.ns); err != nil {
			return PipelinesResult{}, err
		}
	}
	calls := len(e.world.GitHub.CallLog())
	n := e.opts.Pipelines
	e.say("pipelines: %d measured runs per pool, one every %s", n, pipelineSpacing)
	for i := range n {
		if i > 0 {
			time.Sleep(pipelineSpacing)
		}
		if err := p.startRuns(); err != nil {
			return PipelinesResult{}, err
		}
	}
	if err := p.waitRuns(ctx); err != nil {
		return PipelinesResult{}, err
	}
	e.say("pipelines: every run done; waiting for the runners to leave")
	if err := p.waitNoRunners(ctx); err != nil {
		return PipelinesResult{}, err
	}
	graphCalls := 0
	for _, c := range e.world.GitHub.CallLog()[calls:] {
		if c.Route == routeGetRun || c.Route == routeGetContents {
			graphCalls++
		}
	}
	res := PipelinesResult{Runs: n, Seed: seed}
	for _, a := range p.arms {
		arm, err := p.measure(ctx, a, before[a.pool])
		if err != nil {
			return res, err
		}
		if a.prewarm {
			arm.GitHubCallsPerRun = round1(float64(graphCalls) / float64(n))
			res.On = arm
		} else {
			res.Off = arm
		}
	}
	return res, nil
}

// The routes a run's graph is read with: the run (for its file's path), the file.
const (
	routeGetRun      = "GET /repos/{owner}/{repo}/actions/runs/{run_id}"
	routeGetContents = "GET /repos/{owner}/{repo}/contents/{path...}"
)

// setUp creates, per arm, a namespace, an organization with the workflow file and a pool.
func (p *pipelinePhase) setUp(ctx context.Context) error {
	var specs []workflows.PoolSpec
	var pools []string
	for _, prewarm := range []bool{true, false} {
		name := "pipes-off"
		if prewarm {
			name = "pipes-on"
		}
		ns, err := p.e.newNamespace(ctx, name)
		if err != nil {
			return err
		}
		a := &pipelineArm{pool: name, org: "org-" + name, ns: ns, prewarm: prewarm}
		repo := a.org + "/app"
		if err := p.e.world.GitHub.AddRepository(githubdouble.RepositorySpec{FullName: repo}); err != nil {
			return err
		}
		if _, err := p.e.world.GitHub.PushFiles(githubdouble.PushSpec{Repository: repo, Files: map[string]string{pipelinePath: pipelineFile}}); err != nil {
			return err
		}
		spec := poolSpec(a.pool, a.org, ns, 0, 60)
		spec.Labels = pipelineLabels
		if prewarm {
			spec.Prewarm = &workflows.PrewarmSpec{Enabled: true}
		}
		specs, pools = append(specs, spec), append(pools, a.pool)
		p.arms = append(p.arms, a)
	}
	if err := p.e.apply(ctx, specs...); err != nil {
		return err
	}
	return p.e.intake.waitRoutable(ctx, pools...)
}

// startRuns starts one run in each arm, with the same drawn run times.
func (p *pipelinePhase) startRuns() error {
	times := map[string]time.Duration{}
	for _, id := range []string{"lint", "test", "build", "deploy"} {
		spread := 1 + pipelineJobSpread*(2*p.rng.Float64()-1)
		times[id] = time.Duration(float64(pipelineJobTimes[id]) * spread).Round(100 * time.Millisecond)
	}
	for _, a := range p.arms {
		run, err := p.e.world.GitHub.StartRun(githubdouble.RunSpec{Repository: a.org + "/app", Path: pipelinePath})
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.work[run.ID] = times
		p.mu.Unlock()
		a.runs = append(a.runs, run.ID)
	}
	return nil
}

// jobWork is how long a pipeline's job runs (simulator.Config.JobWork): its run's drawn time
// for the file's job it comes from ("deploy (a)" is deploy's); zero for any other job.
func (p *pipelinePhase) jobWork(jobID int64) time.Duration {
	j, ok := p.e.world.GitHub.Job(jobID)
	if !ok {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.work[j.RunID][fileJobID(j.Name)]
}

// fileJobID is the id of the file's job a job of a run comes from: a matrix job's name is its
// id followed by its values in parentheses.
func fileJobID(name string) string {
	id, _, _ := strings.Cut(name, " (")
	return id
}

// waitRuns waits until every run of every arm is over.
func (p *pipelinePhase) waitRuns(ctx context.Context) error {
	return pollEvery(ctx, time.Second, "the pipeline runs to be done", func() (bool, error) {
		for _, a := range p.arms {
			if !p.e.world.GitHub.RunsDone(a.runs...) {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitNoRunners waits until both pools have no runner left, at most pipelineSettle.
func (p *pipelinePhase) waitNoRunners(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pipelineSettle)
	defer cancel()
	return pollEvery(ctx, time.Second, "the pipeline pools' runners to leave", func() (bool, error) {
		for _, a := range p.arms {
			st, err := p.e.status(ctx, a.pool)
			if err != nil {
				return false, err
			}
			if len(st.Runners) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// measure reads one arm's figures from GitHub's job times, its pool's totals and its pods.
func (p *pipelinePhase) measure(ctx context.Context, a *pipelineArm, startedBefore int64) (PipelineArm, error) {
	arm := PipelineArm{Pool: a.pool, Prewarm: a.prewarm}
	var down, up []time.Duration
	var jobSeconds float64
	for _, id := range a.runs {
		run, _ := p.e.world.GitHub.Run(id)
		for _, j := range run.Jobs {
			wait := j.StartedAt.Sub(j.CreatedAt)
			if id := fileJobID(j.Name); id == "lint" || id == "test" {
				up = append(up, wait)
			} else {
				down = append(down, wait)
			}
			jobSeconds += j.CompletedAt.Sub(j.StartedAt).Seconds()
			arm.Jobs++
		}
	}
	arm.Downstream, arm.Upstream = summarize(down), summarize(up)
	st, err := p.e.status(ctx, a.pool)
	if err != nil {
		return arm, err
	}
	arm.RunnersStarted = int(st.Totals.Started - startedBefore)
	arm.RunnerSeconds, arm.JobSeconds = round1(a.pods.stop()), round1(jobSeconds)
	if jobSeconds > 0 {
		arm.IdleShare = math.Round((arm.RunnerSeconds-jobSeconds)/jobSeconds*100) / 100
	}
	return arm, nil
}

// podLives adds up the lives of a namespace's runner pods, from first seen to deleted (or to
// stop, for one still there).
type podLives struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	born   map[string]time.Time
	lived  time.Duration
}

func watchPodLives(ctx context.Context, e *env, ns string) (*podLives, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &podLives{cancel: cancel, born: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.world.Kubernetes, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	name := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			if n := pod.Labels[runnerpod.LabelRunner]; n != "" {
				return n
			}
			return pod.Name
		}
		return ""
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.born1(name(obj)) },
		DeleteFunc: func(obj any) { l.died(name(obj)) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("pipelines pod informer: %w", err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return l, nil
}

func (l *podLives) born1(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.born[name]; !ok && name != "" {
		l.born[name] = time.Now()
	}
}

func (l *podLives) died(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at, ok := l.born[name]; ok {
		l.lived += time.Since(at)
		delete(l.born, name)
	}
}

// stop ends the watch and returns the pods' lives in seconds.
func (l *podLives) stop() float64 {
	l.cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	total := l.lived
	for _, at := range l.born {
		total += time.Since(at)
	}
	return total.Seconds()
}

// printPipelines prints the pipelines phase: each arm's waits, runner time and calls.
func printPipelines(w io.Writer, r *PipelinesResult) {
	if r == nil {
		return
	}
	for _, a := range []PipelineArm{r.On, r.Off} {
		title := fmt.Sprintf("P pipelines, %d runs, prediction off", r.Runs)
		if a.Prewarm {
			title = fmt.Sprintf("P pipelines, %d runs, prediction on", r.Runs)
		}
		row(w, title, "downstream (build, deploy) queued → started", pct(a.Downstream))
		row(w, "", "upstream (lint, test) queued → started", pct(a.Upstream))
		row(w, "", "runners; runner time beside the jobs'", fmt.Sprintf("%d runners for %d jobs; %.0f runner-s for %.0f job-s: %.0f%% more",
			a.RunnersStarted, a.Jobs, a.RunnerSeconds, a.JobSeconds, a.IdleShare*100))
		if a.Prewarm {
			row(w, "", "GitHub reads of runs and workflow files", fmt.Sprintf("%.1f per run", a.GitHubCallsPerRun))
		}
	}
}
