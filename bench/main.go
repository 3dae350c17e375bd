// Command bench measures runnerflow in the local test world (real Temporal dev server, real
// kube-apiserver, the GitHub double and the runner simulator) and prints one table of six
// figures: scale-up latency under a burst of queued jobs, GitHub REST calls per runner
// lifecycle and per webhook event, Temporal history events and billable actions, Kubernetes
// writes per runner, worker memory per idle runner workflow, and the starter's webhook
// throughput. --out writes the same numbers as JSON. --peer arc,arc-scaleset then runs the same
// bursts with actions-runner-controller's summerwind and scale-set modes, each in a fresh world
// of its own, and prints figures 1, 2 and 4 of all side by side with their ratios. docs/benchmarks.md explains each figure.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// Options are the benchmark's settings (its flags).
type Options struct {
	// Jobs are the burst sizes of figures 1–4, one burst each.
	Jobs []int
	// Idle are the numbers of idle runner workflows of figure 5, ascending.
	Idle []int
	// Rate and LoadDuration are figure 6's offered load.
	Rate         int
	LoadDuration time.Duration
	// JobDuration is how long a simulated job runs.
	JobDuration time.Duration
	// PhaseTimeout bounds each burst, the load phase and each memory step.
	PhaseTimeout time.Duration
	// GitHubBudget is the double's and the worker's API budget per hour: far above GitHub's
	// 5000 by default, so the figures show runnerflow and this machine, not the rate limit.
	GitHubBudget int
	// GitHubPointsPerMinute is the secondary rate limit of the double and the worker's pace
	// (GitHub's is 900 points a minute; a registration costs 5).
	GitHubPointsPerMinute int
	// Warm is how many warm registrations (for the peers, warm runners) each burst's pools
	// keep between them, split as the jobs are (warmShares) and ready before the burst is
	// fired; a smaller burst keeps as many as its jobs; 0 measures cold bursts.
	Warm int
	// WorkerBinary is a built worker for figure 5; empty builds ./worker.
	WorkerBinary string
	// KubeQPS and KubeBurst, when set, replace the in-process worker's Kubernetes client rate
	// limit; zero keeps what the worker binary has (the policy default, 100 QPS, burst 200).
	KubeQPS   float64
	KubeBurst int
	// MemoryKubeQPS is the worker binary's --kube-qps in the memory phase (burst twice that):
	// it changes how fast the idle runners come up, not what one costs; 0 keeps the default.
	MemoryKubeQPS float64
	// LogPath receives the warnings of the worker and the world's parts; empty means a new
	// file in the temporary directory.
	LogPath string
	// DeciderTimeline, when set, is a file that gets every event of each burst's pool
	// histories from the burst's first webhook on, one line each: what the pools' decider
	// trace (DeciderTrace) is made of, to read a stall event by event.
	DeciderTimeline string
	// CPUProfile, when set, names the file each burst's CPU profile goes to (burstCPUProfile).
	CPUProfile string
	// Skip names phases not to run: burst, throughput, memory, fleet, pull-fleet.
	Skip []string
	// Peer names a system to measure beside runnerflow after its phases, with the same bursts
	// in a fresh world of its own, comma-separated: "arc" (actions-runner-controller's summerwind
	// mode), "arc-scaleset" (its scale-set mode); empty for none.
	Peer string
	// PeerSyncPeriod is the peer's resync period (ARC's --sync-period; default ARC's 1m).
	PeerSyncPeriod time.Duration
	// Pools, when above zero, runs the fleet phase: that many pools in one organization with
	// PoolRunners runners each, served by Workers worker replicas, at rest and through a burst
	// of PoolJobs jobs (bench/fleet.go).
	Pools       int
	PoolRunners int
	PoolJobs    int
	Workers     int
	// Soak runs the soak phase (bench/soak.go) when Soak.Run is set.
	Soak SoakOptions
	// ScaleSet runs every burst again with scale-set pools (bench/scaleset_burst.go).
	ScaleSet bool
	// Repeat runs the whole benchmark this many times, one after the other, and prints the
	// spread (min, median, max) of each burst's operator figures (bench/repeat.go).
	Repeat int
	// Pipelines, when above zero, runs the pipelines phase: that many measured runs of a
	// workflow with a job graph through a predicting pool and one that does not, their run
	// times drawn with PipelineSeed (bench/pipelines.go).
	Pipelines    int
	PipelineSeed uint64
}

func main() {
	opts, out, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var runs []Results
	for i := range max(opts.Repeat, 1) { // Options built in code may leave it 0: one run
		if opts.Repeat > 1 {
			fmt.Fprintf(os.Stderr, "bench: run %d of %d\n", i+1, opts.Repeat)
		}
		var res Results
		if res, err = run(ctx, opts, os.Stderr); err != nil {
			break
		}
		printTable(os.Stdout, res)
		runs = append(runs, res)
	}
	if err == nil && opts.Repeat > 1 {
		rep := Repeated{Runs: runs, Spread: spreadOf(runs)}
		printSpread(os.Stdout, rep.Spread)
		err = writeJSON(out, rep)
	} else if err == nil {
		err = writeJSON(out, runs[0])
	}
	failed := 0
	for _, r := range runs {
		failed += len(r.Failures)
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d phase(s) failed", failed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (Options, string, error) {
	var opts Options
	var jobs, idle, skip, out string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&jobs, "jobs", "100,500", "burst sizes (queued jobs across 2 pools), comma-separated")
	fs.StringVar(&idle, "idle", "1000,5000", "idle runner workflows alive for the memory figure, ascending, comma-separated")
	fs.IntVar(&opts.Rate, "rate", 200, "webhooks per second offered to the starter")
	fs.DurationVar(&opts.LoadDuration, "load-duration", 10*time.Second, "how long the webhook load lasts")
	fs.DurationVar(&opts.JobDuration, "job-duration", 5*time.Second, "how long a simulated job runs")
	fs.DurationVar(&opts.PhaseTimeout, "phase-timeout", 30*time.Minute, "bound on each burst, the load phase and each memory step")
	fs.IntVar(&opts.GitHubBudget, "github-budget", 10_000_000, "GitHub API requests per hour for the double (the worker reads it from the double's answers)")
	fs.IntVar(&opts.Warm, "warm", 0, "warm runners per burst, split over its two pools as its jobs are and ready before the jobs are queued: runnerflow's warm registrations, the peers' minRunners (ARC's scale sets) or minReplicas (summerwind); a burst smaller than it keeps as many as its jobs; at most the largest burst (0: cold)")
	fs.IntVar(&opts.GitHubPointsPerMinute, "github-points-per-minute", workflows.DefaultGitHubPointsPerMinute, "GitHub's secondary rate limit for the double and the worker's pace (GitHub: 900)")
	fs.StringVar(&opts.WorkerBinary, "worker-bin", "", "a built worker binary for the memory figure (default: go build ./worker)")
	fs.Float64Var(&opts.KubeQPS, "kube-qps", 0, fmt.Sprintf("Kubernetes client QPS of the in-process worker (bursts); 0 keeps the worker binary's (policy default %d)", workflows.DefaultKubernetesQPS))
	fs.IntVar(&opts.KubeBurst, "kube-burst", 0, "Kubernetes client burst with --kube-qps; 0 means twice the QPS")
	fs.Float64Var(&opts.MemoryKubeQPS, "memory-kube-qps", 50, fmt.Sprintf("the worker binary's --kube-qps while the idle runners come up (burst twice that); 0 keeps its default (%d)", workflows.DefaultKubernetesQPS))
	fs.StringVar(&opts.LogPath, "log", "", "file for the worker's and the world's warnings (default: a new file in the temporary directory)")
	fs.StringVar(&opts.CPUProfile, "cpu-profile", "", "write a CPU profile of the benchmark's process (the worker runs in it) from each burst's first webhook until every job started, to FILE-<jobs>.pprof")
	fs.StringVar(&opts.DeciderTimeline, "decider-timeline", "", "append every event of each burst's pool histories, from its first webhook on, to this file, one line each (history, event id, seconds since the first webhook, type, detail)")
	fs.StringVar(&skip, "skip", "", "phases not to run: burst, throughput, memory, fleet, pull-fleet (comma-separated)")
	fs.StringVar(&opts.Peer, "peer", "", "also run the bursts with these systems, comma-separated, each in a fresh world after runnerflow's phases, and print the ratios: arc (actions-runner-controller "+testworld.ARCVersion+", summerwind mode), arc-scaleset (gha-runner-scale-set "+testworld.ARCScaleSetVersion+"'s scale sets at the chart's defaults), arc-scaleset-tuned (the same with its limits raised to runnerflow's)")
	fs.DurationVar(&opts.PeerSyncPeriod, "peer-sync-period", testworld.DefaultARCSyncPeriod, "the peer's resync period (ARC's --sync-period, its default 1m): bounds how late it scales down")
	fs.IntVar(&opts.Pools, "pools", 0, "also run the fleet phases: this many pools in one organization, at rest and through a burst, and as many pull pools of 20 repositories each (0: not run)")
	fs.IntVar(&opts.PoolRunners, "pool-runners", 20, "runners of each pool in the fleet phase")
	fs.IntVar(&opts.PoolJobs, "pool-jobs", 200, "jobs of the fleet phase's burst")
	fs.IntVar(&opts.Workers, "workers", 1, "worker replicas in the fleet phase (the benchmark's own plus replicas in-process)")
	soakFlags(fs, &opts.Soak)
	fs.BoolVar(&opts.ScaleSet, "scaleset", false, "also run every burst with scale-set pools (listeners instead of webhooks) and print both side by side")
	fs.StringVar(&out, "out", "", "write the results as JSON to this file")
	fs.IntVar(&opts.Repeat, "repeat", 1, "run everything this many times and print each burst figure's min, median and max across the runs")
	fs.IntVar(&opts.Pipelines, "pipelines", 0, "also run the pipelines phase: this many runs of a workflow with a job graph (lint and test, then build, then a 4-way matrix deploy) through a pool that predicts its jobs and one that does not (0: not run)")
	fs.Uint64Var(&opts.PipelineSeed, "pipeline-seed", 1, "seed of the pipelines phase's job run times")
	if err := fs.Parse(args); err != nil {
		return opts, "", err
	}
	if fs.NArg() > 0 {
		return opts, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if opts.Repeat < 1 {
		return opts, "", errors.New("--repeat must be at least 1")
	}
	var err error
	if opts.Jobs, err = parseCounts("jobs", jobs); err != nil {
		return opts, "", err
	}
	if opts.Idle, err = parseCounts("idle", idle); err != nil {
		return opts, "", err
	}
	if skip != "" {
		opts.Skip = strings.Split(skip, ",")
	}
	return opts, out, opts.validate()
}

// parseCounts reads a comma-separated list of positive integers.
func parseCounts(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive whole number", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (o Options) validate() error {
	if err := o.Soak.validate(); err != nil {
		return err
	}
	for _, n := range o.Jobs {
		if n > burstPools*workflows.MaxPoolReplicas {
			return fmt.Errorf("--jobs: a burst of %d exceeds %d pools of at most %d runners", n, burstPools, workflows.MaxPoolReplicas)
		}
	}
	if !slices.IsSorted(o.Idle) {
		return fmt.Errorf("--idle: %v must be ascending (each step adds runners)", o.Idle)
	}
	for _, s := range o.Skip {
		if !slices.Contains([]string{"burst", "throughput", "memory", "fleet", "pull-fleet"}, s) {
			return fmt.Errorf("--skip: unknown phase %q (burst, throughput, memory, fleet, pull-fleet)", s)
		}
	}
	switch {
	case o.Rate <= 0:
		return errors.New("--rate must be positive")
	case o.LoadDuration <= 0 || o.JobDuration <= 0 || o.PhaseTimeout <= 0:
		return errors.New("--load-duration, --job-duration and --phase-timeout must be positive")
	case o.Warm < 0:
		return errors.New("--warm must not be negative")
	case len(o.Jobs) > 0 && o.Warm > slices.Max(o.Jobs):
		return fmt.Errorf("--warm %d exceeds the largest burst (%d): a burst keeps at most as many warm runners as it has jobs", o.Warm, slices.Max(o.Jobs))
	case o.GitHubBudget <= 0 || o.GitHubPointsPerMinute <= 0:
		return errors.New("--github-budget and --github-points-per-minute must be positive")
	case o.KubeQPS < 0 || o.KubeBurst < 0 || o.MemoryKubeQPS < 0:
		return errors.New("--kube-qps, --kube-burst and --memory-kube-qps must not be negative")
	case float64(o.Rate)*o.LoadDuration.Seconds() < 1:
		return errors.New("--rate × --load-duration offers no webhook at all")
	case o.peersInvalid() != nil:
		return o.peersInvalid()
	case o.Peer != "" && !o.runs("burst"):
		return errors.New("--peer compares the bursts: it cannot skip burst")
	case o.Pools < 0 || (o.Pools > 0 && (o.PoolRunners <= 0 || o.PoolJobs < 0 || o.Workers <= 0)):
		return errors.New("--pools and --pool-jobs must not be negative, --pool-runners and --workers must be positive")
	case o.PoolRunners > workflows.MaxPoolReplicas:
		return fmt.Errorf("--pool-runners: at most %d runners a pool", workflows.MaxPoolReplicas)
	case o.Pipelines < 0:
		return errors.New("--pipelines must not be negative")
	case o.Peer != "" && o.PeerSyncPeriod <= 0:
		return errors.New("--peer-sync-period must be positive")
	}
	return nil
}

func (o Options) runs(phase string) bool { return !slices.Contains(o.Skip, phase) }

// peers are the systems --peer names, in its order.
func (o Options) peers() []string {
	if o.Peer == "" {
		return nil
	}
	return strings.Split(o.Peer, ",")
}

// peersInvalid says what is wrong with --peer: an unknown or repeated peer.
func (o Options) peersInvalid() error {
	peers := o.peers()
	for i, p := range peers {
		if p != peerARC && p != peerARCScaleSet && p != peerARCScaleSetTuned {
			return fmt.Errorf("--peer: unknown peer %q (arc, arc-scaleset, arc-scaleset-tuned)", p)
		}
		if slices.Contains(peers[:i], p) {
			return fmt.Errorf("--peer: %q named twice", p)
		}
	}
	return nil
}

// run runs runnerflow's phases and then, with --peer, the peer's bursts in a world of its
// own, and returns the results. A phase that fails is recorded in Results.Failures and the
// next one runs; an interrupt stops the run.
func run(ctx context.Context, opts Options, progress io.Writer) (Results, error) {
	began := time.Now()
	res := Results{Date: began.Format("2006-01-02"), Machine: machine(), Options: summaryOf(opts)}
	logPath, err := runRunnerflow(ctx, opts, progress, &res)
	if err != nil {
		return res, err
	}
	if opts.Peer != "" {
		if err := runPeers(ctx, opts, progress, logPath, &res); err != nil {
			return res, err
		}
	}
	res.Seconds = round1(time.Since(began).Seconds())
	res.Machine.LoadEnd = loadAverage()
	return res, nil
}

// runRunnerflow starts the world, runs the phases in order (bursts, throughput, with --pools
// the fleet, with --pipelines the pipelines, with --soak the soak, then memory, which replaces the in-process worker with the worker binary) into
// res, stops the world and returns the log file's path.
func runRunnerflow(ctx context.Context, opts Options, progress io.Writer, res *Results) (string, error) {
	e, err := startEnv(ctx, opts, progress)
	if err != nil {
		return "", err
	}
	defer e.stop()
	logPath := e.logFile.Name()
	e.say("test world up (Temporal %s, kube-apiserver, GitHub double, simulator)", e.world.Temporal.Address)
	failed := func(phase string, err error) bool {
		res.Failures = append(res.Failures, phase+": "+err.Error())
		e.say("%s FAILED: %v", phase, err)
		return ctx.Err() != nil
	}
	for _, n := range opts.Jobs {
		if !opts.runs("burst") {
			break
		}
		b, err := e.burst(ctx, n)
		if err != nil && failed(fmt.Sprintf("burst of %d jobs", n), err) {
			return logPath, ctx.Err()
		}
		if err == nil {
			res.Bursts = append(res.Bursts, b)
		}
	}
	if err := e.runScaleSetBursts(ctx, res, failed); err != nil {
		return logPath, err
	}
	if opts.runs("throughput") {
		t, err := e.throughput(ctx)
		if err != nil && failed("throughput", err) {
			return logPath, ctx.Err()
		}
		if err == nil {
			res.Throughput = &t
		}
	}
	if opts.Pools > 0 && opts.runs("fleet") {
		f, err := e.fleet(ctx)
		if err != nil && failed("fleet", err) {
			return logPath, ctx.Err()
		}
		if err == nil {
			res.Fleet = &f
		}
	}
	if opts.Pools > 0 && opts.runs("pull-fleet") {
		f, err := e.pullFleet(ctx)
		if err != nil && failed("pull fleet", err) {
			return logPath, ctx.Err()
		}
		if err == nil {
			res.PullFleet = &f
		}
	}
	if opts.Pipelines > 0 {
		p, err := e.pipelines(ctx)
		if err != nil && failed("pipelines", err) {
			return logPath, ctx.Err()
		}
		if err == nil {
			res.Pipelines = &p
		}
	}
	if opts.Soak.Run {
		s, err := e.soak(ctx)
		if err != nil && failed("soak", err) {
			return logPath, ctx.Err()
		}
		if err == nil {
			res.Soak = &s
			if len(s.Problems) > 0 {
				res.Failures = append(res.Failures, "soak: "+strings.Join(s.Problems, "; "))
			}
		}
	}
	if opts.runs("memory") {
		m, err := e.memory(ctx)
		if err != nil && failed("memory", err) {
			return logPath, ctx.Err()
		}
		// Points measured before a failure are kept.
		res.Memory = &m
	}
	return logPath, nil
}

func summaryOf(o Options) OptionsSummary {
	return OptionsSummary{
		Jobs: o.Jobs, IdleRunners: o.Idle, Rate: o.Rate, LoadSeconds: o.LoadDuration.Seconds(),
		JobSeconds: o.JobDuration.Seconds(), GitHubBudgetPerHr: o.GitHubBudget,
		KubeQPS: o.KubeQPS, KubeBurst: o.kubeBurst(), MemoryKubeQPS: o.MemoryKubeQPS, Peer: o.Peer,
		Pools: o.Pools, PoolRunners: o.PoolRunners, PoolJobs: o.PoolJobs, Workers: o.Workers,
		Soak: o.Soak.Run, ScaleSet: o.ScaleSet,
	}
}

// kubeBurst is the burst that goes with KubeQPS.
func (o Options) kubeBurst() int {
	if o.KubeQPS > 0 && o.KubeBurst == 0 {
		return int(2 * o.KubeQPS)
	}
	return o.KubeBurst
}

// machine describes this machine: CPUs, memory (from /proc/meminfo), Go.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" {
				kib, _ := strconv.Atoi(f[1])
				m.MemoryGiB = round1(float64(kib) / (1 << 20))
			}
		}
	}
	return m
}

// loadAverage is the 1-, 5- and 15-minute load average from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

func writeJSON(path string, res any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
