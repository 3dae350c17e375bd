package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// SoakResult is the --soak phase: jobs queued at a steady rate while faults are injected, and
// what runnerflow's promises look like once everything converged (docs/benchmarks.md, "Soak").
type SoakResult struct {
	// Seed drew the fault plan; --soak-seed repeats it.
	Seed  int64 `json:"seed"`
	Jobs  int   `json:"jobs"`
	Pools int   `json:"pools"`
	// ScaleSetPool names the pool among them that is a runner scale set's whose jobs the
	// service assigns it (github.com), OfferingScaleSetPool the one whose jobs it offers, to be
	// acquired (GitHub Enterprise Server).
	ScaleSetPool         string `json:"scaleSetPool,omitempty"`
	OfferingScaleSetPool string `json:"offeringScaleSetPool,omitempty"`
	// QueueSeconds is how long the jobs were queued over, JobSeconds how long each ran,
	// ReconcileSeconds the reconcile Schedule's interval.
	QueueSeconds     float64     `json:"queueSeconds"`
	JobSeconds       float64     `json:"jobSeconds"`
	ReconcileSeconds float64     `json:"reconcileSeconds"`
	Faults           []SoakFault `json:"faults"`
	// FaultsOverSeconds is when the last fault ended, LastQueuedSeconds when the last job was
	// queued, both from the first job's queueing.
	FaultsOverSeconds float64 `json:"faultsOverSeconds"`
	LastQueuedSeconds float64 `json:"lastQueuedSeconds"`
	// Converged says everything came to rest within --soak-settle; ConvergeSeconds runs from the
	// last fault's end to rest (or to the bound).
	Converged       bool    `json:"converged"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// JobsWithoutRunner never ran or never completed.
	JobsWithoutRunner []int64 `json:"jobsWithoutRunner"`
	// Orphans are pods, Secrets and GitHub registrations of the pools whose runner workflow is
	// not running; OpenRunnerWorkflows the pools' runner workflows still running.
	Orphans             []string `json:"orphans"`
	OpenRunnerWorkflows []string `json:"openRunnerWorkflows"`
	// BusyRunnersRemoved are the jobs that failed: a job fails at GitHub only when its runner
	// goes while it runs (the simulator's jobs succeed otherwise).
	BusyRunnersRemoved []int64 `json:"busyRunnersRemoved"`
	// DuplicatePods are runner names that had two pods; RunnersWithTwoJobs ephemeral runners
	// that ran more than one job.
	DuplicatePods      []string `json:"duplicatePods"`
	RunnersWithTwoJobs []string `json:"runnersWithTwoJobs"`
	// RunnerLifecycles are the pools' runner workflows, per job in LifecyclesPerJob, per pool
	// in LifecyclesByPool.
	RunnerLifecycles int            `json:"runnerLifecycles"`
	LifecyclesPerJob float64        `json:"lifecyclesPerJob"`
	LifecyclesByPool map[string]int `json:"lifecyclesByPool"`
	// JobsReassigned are the scale-set jobs the service took back at least once (no runner
	// took them in time), Reassignments how many times it took jobs back in all.
	JobsReassigned int `json:"jobsReassigned"`
	Reassignments  int `json:"reassignments"`
	// RemovalsRefusedBusy are GitHub's refusals of a runner removal (a removal that met a busy
	// runner and was refused, as it should be: REST's 422, the Actions service's 400); FailedDeliveries the webhook deliveries
	// that got no 2xx answer, Redeliveries the redeliveries made.
	RemovalsRefusedBusy int `json:"removalsRefusedBusy"`
	FailedDeliveries    int `json:"failedDeliveries"`
	Redeliveries        int `json:"redeliveries"`
	// WorkerExits counts worker processes that ended by themselves (not killed by the plan);
	// the soak started a new one each time, as Kubernetes restarts a container.
	WorkerExits int `json:"workerExits"`
	// UngracefulStops counts the workers a rolling deploy stopped that did not end within
	// workerStopGrace of their SIGTERM and were killed.
	UngracefulStops int `json:"ungracefulStops"`
	// Problems lists what failed the soak; empty is a pass.
	Problems []string `json:"problems"`
}

// SoakFault is one fault as it happened: when (from the first job's queueing), how long the
// whole fault took (outage and recovery), the outage planned, and GitHub's answer.
type SoakFault struct {
	Kind          string  `json:"kind"`
	AtSeconds     float64 `json:"atSeconds"`
	Seconds       float64 `json:"seconds"`
	OutageSeconds float64 `json:"outageSeconds"`
	Status        int     `json:"status,omitempty"`
	// LapseSeconds is, for a reassignment, how long an assignment lasted at the service;
	// TakenBack how many times it took a job back meanwhile.
	LapseSeconds float64 `json:"lapseSeconds,omitempty"`
	TakenBack    int     `json:"takenBack,omitempty"`
	// ServedAgainSeconds is, for a session expiry or a rolling deploy, when every scale set
	// was polled again through a new session, from the fault's start (a deploy's: the first
	// worker's SIGTERM); 0 if not within sessionsBackBound.
	ServedAgainSeconds float64 `json:"servedAgainSeconds,omitempty"`
	// QueuedDuring is, for a rolling deploy, how many scale-set jobs were queued during it
	// (from the second worker's start until the first had exited and every set had a new
	// session); the two figures after it how long after its queueing such a job started, the
	// median and the longest.
	QueuedDuring                  int     `json:"queuedDuring,omitempty"`
	QueuedDuringStartedP50Seconds float64 `json:"queuedDuringStartedP50Seconds,omitempty"`
	QueuedDuringStartedMaxSeconds float64 `json:"queuedDuringStartedMaxSeconds,omitempty"`
}

// measure counts what the soak left: jobs, orphans, failed jobs, duplicates, lifecycles.
func (s *soakPhase) measure(ctx context.Context, res SoakResult) (SoakResult, error) {
	gh := s.e.world.GitHub
	ran := map[string]int{}
	for _, id := range s.jobIDs() {
		j, _ := gh.Job(id)
		switch {
		case j.Status != githubdouble.StatusCompleted || j.RunnerName == "":
			res.JobsWithoutRunner = append(res.JobsWithoutRunner, id)
		case j.Conclusion != githubdouble.ConclusionSuccess:
			res.BusyRunnersRemoved = append(res.BusyRunnersRemoved, id)
		}
		if j.RunnerName != "" {
			ran[j.RunnerName]++
		}
	}
	for name, n := range ran {
		if n > 1 {
			res.RunnersWithTwoJobs = append(res.RunnersWithTwoJobs, fmt.Sprintf("%s (%d jobs)", name, n))
		}
	}
	res.DuplicatePods = s.pods.duplicates()
	open, err := listRuns(ctx, s.e.c, s.runnerQuery()+runningOnly)
	if err != nil {
		return res, err
	}
	running := map[string]bool{}
	for _, r := range open {
		running[runnerName(r.id)] = true
		res.OpenRunnerWorkflows = append(res.OpenRunnerWorkflows, r.id)
	}
	objs, err := s.leftObjects(ctx)
	if err != nil {
		return res, err
	}
	for _, o := range objs {
		if !running[o[strings.Index(o, "/")+1:]] {
			res.Orphans = append(res.Orphans, o)
		}
	}
	all, err := listRuns(ctx, s.e.c, s.runnerQuery())
	if err != nil {
		return res, err
	}
	res.RunnerLifecycles = distinctWorkflows(all)
	res.LifecyclesPerJob = ratio(res.RunnerLifecycles, len(s.jobIDs()))
	res.LifecyclesByPool = lifecyclesByPool(all)
	res.JobsReassigned, res.Reassignments = reassigned(gh, s.setJobIDs())
	res.RemovalsRefusedBusy, res.FailedDeliveries, res.Redeliveries = githubTallies(gh, s.jobIDs())
	res.WorkerExits, res.UngracefulStops = s.workerExits, s.ungracefulStops
	for _, l := range []*[]string{&res.RunnersWithTwoJobs, &res.DuplicatePods, &res.OpenRunnerWorkflows, &res.Orphans} {
		*l = append([]string{}, *l...) // [] rather than null in the JSON
		slices.Sort(*l)
	}
	res.JobsWithoutRunner = append([]int64{}, res.JobsWithoutRunner...)
	res.BusyRunnersRemoved = append([]int64{}, res.BusyRunnersRemoved...)
	res.Problems = append([]string{}, res.problems()...)
	return res, nil
}

// lifecyclesByPool counts the runner workflows of each pool (runner/<pool>/<name>).
func lifecyclesByPool(runs []executionRef) map[string]int {
	seen := map[string]bool{}
	out := map[string]int{}
	for _, r := range runs {
		if parts := strings.Split(r.id, "/"); len(parts) == 3 && !seen[r.id] {
			seen[r.id] = true
			out[parts[1]]++
		}
	}
	return out
}

// reassigned counts the jobs the service took back at least once, and the times it did.
func reassigned(gh *githubdouble.Server, jobs []int64) (jobsTakenBack, times int) {
	for _, id := range jobs {
		if j, _ := gh.Job(id); j.Reassigned > 0 {
			jobsTakenBack++
			times += j.Reassigned
		}
	}
	return jobsTakenBack, times
}

// leftObjects names the pods and Secrets in the soak's namespace and the GitHub registrations
// of its pools, as kind/runner-name.
func (s *soakPhase) leftObjects(ctx context.Context) ([]string, error) {
	core := s.e.world.Kubernetes.CoreV1()
	pods, err := core.Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	secrets, err := core.Secrets(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	named := func(kind string, m metav1.ObjectMeta) {
		name := m.Labels[runnerpod.LabelRunner]
		if name == "" {
			name = m.Name
		}
		out = append(out, kind+"/"+name)
	}
	for _, p := range pods.Items {
		named("pod", p.ObjectMeta)
	}
	for _, sec := range secrets.Items {
		named("secret", sec.ObjectMeta)
	}
	for _, r := range s.e.world.GitHub.Runners() {
		if pool, ok := workflows.PoolFromRunnerName(r.Name); ok && slices.Contains(s.pools, pool) {
			out = append(out, "registration/"+r.Name)
		}
	}
	return out, nil
}

// githubTallies counts GitHub's refusals to remove a busy runner (REST and the Actions
// service), and the soak's webhook
// deliveries that failed and were redelivered.
func githubTallies(gh *githubdouble.Server, jobs []int64) (refused, failed, redelivered int) {
	for k, n := range gh.Calls() {
		if k.Status == http.StatusUnprocessableEntity && strings.HasPrefix(k.Route, http.MethodDelete+" ") && strings.Contains(k.Route, "/actions/runners/") {
			refused += n
		}
	}
	for k, n := range gh.ActionsServiceCalls() { // a scale-set runner's removal, refused while its job runs
		if k.Status == http.StatusBadRequest && strings.HasPrefix(k.Route, http.MethodDelete+" ") && strings.HasSuffix(k.Route, "/{runner_id}") {
			refused += n
		}
	}
	for _, d := range gh.Deliveries() {
		if !slices.Contains(jobs, d.JobID) || !d.Done {
			continue
		}
		if d.Redelivery {
			redelivered++
		}
		if d.StatusCode < 200 || d.StatusCode > 299 {
			failed++
		}
	}
	return refused, failed, redelivered
}

// problems is what fails the soak: every count must be 0 and the world must have come to rest.
func (r SoakResult) problems() []string {
	var out []string
	if !r.Converged {
		out = append(out, fmt.Sprintf("not at rest %.0f s after the last fault", r.ConvergeSeconds))
	}
	for _, c := range []struct {
		what string
		n    int
	}{
		{"jobs without a runner", len(r.JobsWithoutRunner)},
		{"orphans", len(r.Orphans)},
		{"runner workflows still open", len(r.OpenRunnerWorkflows)},
		{"busy runners removed (jobs failed)", len(r.BusyRunnersRemoved)},
		{"duplicate pods", len(r.DuplicatePods)},
		{"runners that ran two jobs", len(r.RunnersWithTwoJobs)},
		{"workers killed after their SIGTERM in a rolling deploy", r.UngracefulStops},
	} {
		if c.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return out
}

// printSoak prints the --soak phase's rows.
func printSoak(w io.Writer, r *SoakResult) {
	if r == nil {
		return
	}
	title := fmt.Sprintf("S soak, %d jobs over %.0f s, %d pools", r.Jobs, r.QueueSeconds, r.Pools)
	if r.ScaleSetPool != "" {
		title += fmt.Sprintf(" (%s a scale set's, assigned its jobs", r.ScaleSetPool)
		if r.OfferingScaleSetPool != "" {
			title += fmt.Sprintf("; %s one's offered them", r.OfferingScaleSetPool)
		}
		title += ")"
	}
	row(w, title, "seed; faults", fmt.Sprintf("%d; %s", r.Seed, faultList(r.Faults)))
	verdict := "PASS"
	if len(r.Problems) > 0 {
		verdict = "FAIL: " + strings.Join(r.Problems, "; ")
	}
	row(w, "", "verdict", verdict)
	converged := fmt.Sprintf("%.1f s after the last fault's end (faults over at %.0f s, last job queued at %.0f s)",
		r.ConvergeSeconds, r.FaultsOverSeconds, r.LastQueuedSeconds)
	if !r.Converged {
		converged = "NOT at rest " + converged
	}
	row(w, "", "time to converge", converged)
	row(w, "", "jobs without a runner", fmt.Sprintf("%d%s", len(r.JobsWithoutRunner), examples(idStrings(r.JobsWithoutRunner))))
	row(w, "", "orphans (pods, Secrets, registrations)", fmt.Sprintf("%d%s", len(r.Orphans), examples(r.Orphans)))
	row(w, "", "runner workflows still open", fmt.Sprintf("%d%s", len(r.OpenRunnerWorkflows), examples(r.OpenRunnerWorkflows)))
	row(w, "", "busy runners removed (jobs failed)", fmt.Sprintf("%d%s; %d removals GitHub refused as busy (REST 422, Actions service 400)",
		len(r.BusyRunnersRemoved), examples(idStrings(r.BusyRunnersRemoved)), r.RemovalsRefusedBusy))
	row(w, "", "duplicate pods; runners with two jobs", fmt.Sprintf("%d%s; %d%s",
		len(r.DuplicatePods), examples(r.DuplicatePods), len(r.RunnersWithTwoJobs), examples(r.RunnersWithTwoJobs)))
	row(w, "", "runner lifecycles per job", fmt.Sprintf("%.3f (%d for %d jobs; by pool %s)", r.LifecyclesPerJob, r.RunnerLifecycles, r.Jobs, byName(r.LifecyclesByPool)))
	row(w, "", "scale-set jobs taken back by the service", fmt.Sprintf("%d jobs, %d times", r.JobsReassigned, r.Reassignments))
	row(w, "", "webhook deliveries failed; redelivered", fmt.Sprintf("%d; %d (reconcile Schedule every %.0f s)", r.FailedDeliveries, r.Redeliveries, r.ReconcileSeconds))
	row(w, "", "worker processes that exited by themselves; killed after a deploy's SIGTERM", fmt.Sprintf("%d; %d", r.WorkerExits, r.UngracefulStops))
}

// faultList renders the faults in order: kind at its start, its length, and what a
// reassignment took back and when the sets were served again.
func faultList(fs []SoakFault) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		kind := f.Kind
		if f.Status != 0 {
			kind = fmt.Sprintf("%s %d", kind, f.Status)
		}
		var more []string
		if f.LapseSeconds > 0 {
			more = append(more, fmt.Sprintf("lapse %.0f s, %d taken back", f.LapseSeconds, f.TakenBack))
		}
		if f.ServedAgainSeconds > 0 {
			more = append(more, fmt.Sprintf("sets served again after %.1f s", f.ServedAgainSeconds))
		}
		if f.QueuedDuring > 0 {
			more = append(more, fmt.Sprintf("%d set jobs queued during it started after %.1f s (median), %.1f s (longest)",
				f.QueuedDuring, f.QueuedDuringStartedP50Seconds, f.QueuedDuringStartedMaxSeconds))
		}
		parts = append(parts, fmt.Sprintf("%s at %.0f s (%s)", kind, f.AtSeconds, strings.Join(append([]string{fmt.Sprintf("%.0f s", f.Seconds)}, more...), "; ")))
	}
	return strings.Join(parts, ", ")
}

// byName renders counts by name, in name order.
func byName(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func idStrings(ids []int64) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, fmt.Sprint(id))
	}
	return out
}
