package poolcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runnerflow/runnerflow/workflows"
)

// WhyOptions are what `why` needs besides the Temporal client.
type WhyOptions struct {
	// Namespace and UIAddress make the Temporal UI link; an empty UIAddress makes none.
	Namespace string
	UIAddress string
	// Pods reads a runner's pod (nil: the pod is not read; `why` says so).
	Pods PodReader
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WhyReport is `starter why`'s answer for one job.
type WhyReport struct {
	Job  int64  `json:"job"`
	Pool string `json:"pool,omitempty"`
	// Waiting is true while the job has no runner.
	Waiting bool `json:"waiting"`
	Verdict
	// Path is what happened to the job so far, oldest first.
	Path  []Step   `json:"path"`
	Facts WhyFacts `json:"facts"`
}

// Step is one fact on the job's path.
type Step struct {
	At   time.Time `json:"at,omitzero"`
	What string    `json:"what"`
}

// Why gathers what the system holds about a job and judges why it waits. It reads: every
// running pool's status query (one visibility list and one query a pool), the unmatched-jobs
// query, and for the runner the job waits for, its status query, its workflow's description
// and, with opt.Pods, its pod. Nothing is written.
func Why(ctx context.Context, c client.Client, job int64, opt WhyOptions) (WhyReport, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	f, err := gatherWhy(ctx, c, job, opt)
	if err != nil {
		return WhyReport{}, err
	}
	f.Now = now()
	v := decideCause(f)
	r := WhyReport{Job: job, Waiting: v.Cause != CauseNone, Verdict: v, Facts: f}
	if f.Pool != nil {
		r.Pool = f.Pool.Name
	}
	r.Path = whyPath(f)
	return r, nil
}

func gatherWhy(ctx context.Context, c client.Client, job int64, opt WhyOptions) (WhyFacts, error) {
	var f WhyFacts
	names, err := Pools(ctx, c)
	if err != nil {
		return f, err
	}
	f.Pools = len(names)
	var all []workflows.PoolStatus
	var runner *workflows.PoolRunner
	for _, name := range names {
		st, err := Status(ctx, c, name)
		if err != nil {
			return f, err
		}
		all = append(all, st)
		if st.Pull != nil {
			f.Pulled = append(f.Pulled, PulledPool{Pool: st.Name, At: st.Pull.At, Queued: st.Pull.Queued})
		}
		if i := slices.IndexFunc(st.Reserved, func(r workflows.Reservation) bool { return r.JobID == job }); i >= 0 {
			f.Reservation, f.Pool = &st.Reserved[i], &st
		}
		if i := slices.IndexFunc(st.Runners, func(r workflows.PoolRunner) bool { return r.JobID == job }); i >= 0 {
			runner, f.Pool, f.Running = &st.Runners[i], &st, true
		}
		if st.ScaleSet != nil {
			f.ScaleSets = append(f.ScaleSets, scaleSetOf(&st, job))
		}
	}
	if f.Pool != nil && f.Running {
		if f.Reservation != nil {
			f.QueuedAt = f.Reservation.QueuedAt
		}
		f.Reservation = nil // the job has its runner; the reservation only waits for it to end
	}
	if f.Pool != nil {
		if i := slices.IndexFunc(f.Pool.Prewarmed, func(p workflows.PrewarmedJob) bool { return p.JobID == job }); i >= 0 {
			f.Prewarmed = &f.Pool.Prewarmed[i]
		}
	}
	if f.Pool == nil {
		if err := placeInScaleSets(ctx, c, &f, all, job); err != nil {
			return f, err
		}
	}
	if f.ScaleSet != nil {
		runner = setRunner(f.Pool, f.ScaleSet.Job, job)
	}
	if f.Pool == nil {
		if f.Unmatched, err = unmatchedJob(ctx, c, job); err != nil {
			return f, err
		}
		if f.Unmatched != nil {
			f.NearMisses = nearMisses(all, f.Unmatched.Labels)
		}
		return f, nil
	}
	if runner == nil {
		runner = pairedRunner(f.Pool, job)
	}
	if runner != nil {
		f.Runner, err = readRunner(ctx, c, f.Pool, *runner, opt)
	}
	return f, err
}

// unmatchedJob reads the job's record from the unmatched-jobs workflow; nil when it is not
// there (or the workflow was never started: no job went unmatched).
func unmatchedJob(ctx context.Context, c client.Client, job int64) (*workflows.UnmatchedJob, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, workflows.UnmatchedJobsWorkflowID, "", workflows.QueryStatus)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("unmatched jobs: %w", err)
	}
	var st workflows.UnmatchedJobsStatus
	if err := v.Get(&st); err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(st.Jobs, func(j workflows.UnmatchedJob) bool { return j.JobID == job }); i >= 0 {
		return &st.Jobs[i], nil
	}
	return nil, nil
}

// nearMisses names, for each pool, the job's labels it lacks, closest first (fewest missing),
// at most three pools.
func nearMisses(pools []workflows.PoolStatus, labels []string) []NearMiss {
	var out []NearMiss
	for _, p := range pools {
		var missing []string
		for _, l := range labels {
			if !workflows.LabelsFit(p.Spec.Labels, []string{l}) {
				missing = append(missing, l)
			}
		}
		if len(missing) < len(labels) || len(labels) == 0 {
			out = append(out, NearMiss{Pool: p.Name, Missing: missing})
		}
	}
	slices.SortStableFunc(out, func(a, b NearMiss) int { return len(a.Missing) - len(b.Missing) })
	return out[:min(len(out), 3)]
}

// runnerFacts reads one runner: its status query, its workflow's description (start time,
// pending activities) and, when it may, its pod.
func runnerFacts(ctx context.Context, c client.Client, pool *workflows.PoolStatus, r workflows.PoolRunner, opt WhyOptions) (*RunnerFacts, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	id := workflows.RunnerWorkflowID(pool.Name, r.Name)
	rf := &RunnerFacts{WorkflowID: id, Started: r.StartedAt, UILink: uiLink(opt, id)}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("runner %s: %w", r.Name, err)
	}
	rf.Started = desc.GetWorkflowExecutionInfo().GetStartTime().AsTime()
	rf.Activity = longestPending(desc.GetPendingActivities())
	if desc.GetWorkflowExecutionInfo().GetCloseTime() == nil {
		v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err != nil {
			return nil, fmt.Errorf("runner %s: %w", r.Name, err)
		}
		if err := v.Get(&rf.Status); err != nil {
			return nil, err
		}
	}
	if w := rf.Status.CredentialWait; rf.Activity == nil && w != nil {
		// The credential step failed and waits for the runner's loop, not for Temporal's
		// retry: the runner reports it, and `why` judges it as the activity it will run again.
		rf.Activity = &PendingActivity{Type: w.Activity, Started: true, Attempt: 1,
			FailureType: w.FailureType, Failure: w.Failure, NextAttempt: w.RetryAt}
	}
	// The pod watcher tells a runner only of the transitions it acts on, so a pod that never
	// left Pending shows no phase: read the pod of any runner not yet online.
	if opt.Pods != nil && !rf.Status.Online && rf.Status.PodPhase != workflows.PodRunning && !rf.Status.PodCreatedAt.IsZero() {
		rf.PodWaiting, rf.PodScheduled = opt.Pods.PodWaiting(ctx, pool.Spec.Namespace, r.Name)
		rf.PodRead = true
	}
	return rf, nil
}

// uiLink is the runner workflow's page in the Temporal UI.
func uiLink(opt WhyOptions, id string) string {
	if opt.UIAddress == "" {
		return ""
	}
	ns := opt.Namespace
	if ns == "" {
		ns = "default"
	}
	return strings.TrimSuffix(opt.UIAddress, "/") + "/namespaces/" + url.PathEscape(ns) + "/workflows/" + url.PathEscape(id)
}

// RunWhy is `starter why <job id> [-o text|json] [--kubeconfig path] [--ui address]`.
func RunWhy(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("why", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var conn Connection
	conn.flags(fs)
	output := fs.String("o", "text", "output format: text or json")
	kubeconfig := fs.String("kubeconfig", "", "read the runner's pod with this kubeconfig (its Pending reason); empty reads no pod")
	ui := fs.String("ui", envOr("TEMPORAL_UI_ADDRESS", "http://localhost:8233"), "the Temporal UI's address, for the runner workflow's link (TEMPORAL_UI_ADDRESS)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	usage := errors.New("usage: starter why <job id> [-o text|json] [--kubeconfig path] [--ui address] [--temporal-address host:port] [--namespace ns]")
	if len(pos) != 1 || (*output != "text" && *output != "json") {
		return usage
	}
	job, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || job <= 0 {
		return fmt.Errorf("job id %q is not a positive number\n%w", pos[0], usage)
	}
	opt := WhyOptions{Namespace: conn.Namespace, UIAddress: *ui}
	if *kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		opt.Pods = KubePods{Client: kc}
	}
	c, err := conn.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := Why(ctx, c, job, opt)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(stdout, r)
	}
	printWhy(stdout, r)
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
