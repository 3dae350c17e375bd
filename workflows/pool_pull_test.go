package workflows

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var pullNow = time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)

func pullRunner(name string, state RunnerState, job int64) PoolRunner {
	return PoolRunner{Name: name, State: state, Busy: state == RunnerBusy, JobID: job, TemplateHash: decHashNew}
}

func reserved(jobs ...int64) ReservationState {
	var s ReservationState
	for _, j := range jobs {
		s.Reservations = append(s.Reservations, Reservation{JobID: j, ExpiresAt: pullNow.Add(5 * time.Minute), Duration: 10 * time.Minute})
	}
	return s
}

// pulled is one repository's answer with the given jobs, one run each.
func pulled(jobs ...PulledJob) []PulledRepo {
	repo := PulledRepo{Repository: "acme/app"}
	for _, j := range jobs {
		repo.Runs = append(repo.Runs, PulledRun{RunID: j.ID + 1000, Jobs: []PulledJob{j}})
	}
	return []PulledRepo{repo}
}

func queuedJob(id int64) PulledJob { return PulledJob{ID: id, Status: JobQueued} }
func runningJob(id int64, runner string) PulledJob {
	return PulledJob{ID: id, Status: JobInProgress, RunnerName: runner}
}

func queuedIn(minR, minIdle int, f func(*PullDecideInput)) PullDecideInput {
	in := PullDecideInput{Now: pullNow, Pool: "p", Spec: PullSpec{Metric: PullMetricQueuedJobs},
		Bounds: Bounds{Min: minR, Max: 10, MinIdle: minIdle}}
	if f != nil {
		f(&in)
	}
	return in
}

func busyIn(target int, evaluate bool, runners ...PoolRunner) PullDecideInput {
	return PullDecideInput{Now: pullNow, Pool: "p", Bounds: Bounds{Min: 1, Max: 10}, Runners: runners, Target: target, Evaluate: evaluate,
		Spec: PullSpec{Metric: PullMetricBusyPercentage}.withDefaults()}
}

func TestDecidePull(t *testing.T) {
	idle, busy, pending := RunnerIdle, RunnerBusy, RunnerPending
	cases := []struct {
		name   string
		in     PullDecideInput
		want   int
		target int
	}{
		{name: "nothing queued: min", in: queuedIn(1, 0, nil), want: 1},
		{name: "queued jobs GitHub lists need runners", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(queuedJob(1), queuedJob(2), queuedJob(3))
		}), want: 3},
		{name: "min adds to the queued jobs, as to reservations", in: queuedIn(2, 0, func(in *PullDecideInput) {
			in.Repos = pulled(queuedJob(1))
		}), want: 3},
		{name: "a queued job with a reservation counts once", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos, in.Reserved = pulled(queuedJob(1), queuedJob(2)), reserved(2, 3)
		}), want: 3},
		{name: "a job GitHub lists queued but the webhooks said is over counts nothing", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(queuedJob(1), queuedJob(2))
			in.Reserved.Released = []ReleasedJob{{JobID: 2, ForgetAt: pullNow.Add(time.Hour)}}
		}), want: 1},
		{name: "a job a runner of the pool runs is its runner, not a waiting job", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos, in.Reserved = pulled(queuedJob(1), runningJob(2, "p-ab12-1")), reserved(1, 2)
			in.Runners = []PoolRunner{pullRunner("p-ab12-1", busy, 0)}
		}), want: 2},
		{name: "GitHub names a runner the pool thinks idle: it is busy", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(runningJob(2, "p-ab12-1"))
			in.Runners = []PoolRunner{pullRunner("p-ab12-1", idle, 0)}
		}), want: 1},
		{name: "a runner's reported job still queued in a stale answer counts once", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos, in.Runners = pulled(queuedJob(1)), []PoolRunner{pullRunner("p-ab12-1", busy, 1)}
		}), want: 1},
		{name: "a busy runner whose job is unknown serves a waiting job: a stale answer starts no second runner", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos, in.Runners = pulled(queuedJob(1), queuedJob(2)), []PoolRunner{pullRunner("p-ab12-1", busy, 0)}
		}), want: 2},
		{name: "a runner that ended since the read ran one of the listed jobs", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos, in.ReadAt = pulled(queuedJob(1), queuedJob(2)), pullNow.Add(-time.Minute)
			in.Finished = []FinishedRunner{{Name: "p-ab12-1", State: RunnerDone, At: pullNow.Add(-time.Second)},
				{Name: "p-ab12-0", State: RunnerDone, At: pullNow.Add(-2 * time.Minute)}, {Name: "p-ab12-3", State: RunnerFailed, At: pullNow}}
		}), want: 1},
		{name: "busy runners are kept beside waiting jobs", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(queuedJob(9), runningJob(1, "p-ab12-1"), runningJob(2, "p-ab12-2"))
			in.Runners = []PoolRunner{pullRunner("p-ab12-1", busy, 0), pullRunner("p-ab12-2", busy, 0)}
		}), want: 3},
		{name: "another pool's runner on a job: not this pool's", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(runningJob(1, "q-ab12-1"))
		}), want: 0},
		{name: "minIdle over busy", in: queuedIn(0, 2, func(in *PullDecideInput) {
			in.Runners = []PoolRunner{pullRunner("p-ab12-1", busy, 7)}
		}), want: 3},
		{name: "a run with jobs on a page not read holds the runners: no scale-down on a partial answer", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(queuedJob(1))
			in.Repos[0].Runs[0].Unread = true
			in.Runners = []PoolRunner{pullRunner("p-ab12-1", idle, 0), pullRunner("p-ab12-2", idle, 0), pullRunner("p-ab12-3", pending, 0)}
		}), want: 3},
		{name: "jobs on a run's later pages count like the first page's", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Repos = pulled(queuedJob(1))
			in.Repos[0].Runs[0].More = []PulledPage{{Jobs: []PulledJob{queuedJob(2), queuedJob(3)}}}
		}), want: 3},
		{name: "expired reservations count nothing", in: queuedIn(0, 0, func(in *PullDecideInput) {
			in.Reserved = ReservationState{Reservations: []Reservation{{JobID: 1, ExpiresAt: pullNow}}}
		}), want: 0},

		{name: "busy: all busy scales up by the factor", in: busyIn(2, true, pullRunner("a", busy, 0), pullRunner("b", busy, 0)), want: 3, target: 3},
		{name: "busy: at the up threshold scales up", in: busyIn(5, true,
			pullRunner("a", busy, 0), pullRunner("b", busy, 0), pullRunner("c", busy, 0), pullRunner("d", busy, 0), pullRunner("e", idle, 0)), want: 7, target: 7},
		{name: "busy: between thresholds keeps the online count", in: busyIn(4, true,
			pullRunner("a", busy, 0), pullRunner("b", idle, 0)), want: 2, target: 2},
		{name: "busy: at or below the down threshold scales down by the factor", in: busyIn(4, true,
			pullRunner("a", idle, 0), pullRunner("b", idle, 0), pullRunner("c", idle, 0), pullRunner("d", idle, 0)), want: 2, target: 2},
		{name: "busy: never below min", in: busyIn(1, true, pullRunner("a", idle, 0)), want: 1, target: 1},
		{name: "busy: runners starting hold the target", in: busyIn(4, true, pullRunner("a", busy, 0), pullRunner("b", pending, 0)), want: 4, target: 4},
		{name: "busy: between reads the target holds", in: busyIn(4, false, pullRunner("a", idle, 0)), want: 4, target: 4},
		{name: "busy: no runner online falls to min", in: busyIn(4, true), want: 1, target: 1},
		{name: "busy: reservations are served between reads", in: func() PullDecideInput {
			in := busyIn(1, false, pullRunner("a", busy, 5))
			in.Reserved = reserved(5, 6, 7)
			return in
		}(), want: 3, target: 1},
		{name: "busy: pulled jobs are not read by the busy metric", in: func() PullDecideInput {
			in := busyIn(1, false)
			in.Repos = pulled(queuedJob(1), queuedJob(2))
			return in
		}(), want: 1, target: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DecidePull(c.in)
			if got.Want != c.want || got.Target != c.target {
				t.Errorf("DecidePull = want %d, target %d (%s); want %d, target %d", got.Want, got.Target, got.Why, c.want, c.target)
			}
			if !strings.HasPrefix(got.Why, "pull: ") {
				t.Errorf("why %q does not explain the pull", got.Why)
			}
		})
	}
}

// TestDecideWithPullClampsTheWant: the pull's want replaces the reservation count and is
// clamped by the bounds; a draining pool still wants nothing.
func TestDecideWithPullClampsTheWant(t *testing.T) {
	in := decIn(1, 4)
	in.Demand = &Demand{Want: 9, Why: "pull: want 9"}
	if p := Decide(in); p.Desired != 4 || len(p.Start) != 4 || !strings.Contains(p.Why, "pull: want 9") {
		t.Errorf("Decide with a pull wanting 9 in [1, 4]: desired %d, %d starts, why %q", p.Desired, len(p.Start), p.Why)
	}
	in.Demand.Want = 0
	if p := Decide(in); p.Desired != 1 {
		t.Errorf("Decide with a pull wanting 0, min 1: desired %d", p.Desired)
	}
	in.Mode = PoolDraining
	if p := Decide(in); p.Desired != 0 {
		t.Errorf("draining pool with a pull: desired %d, want 0", p.Desired)
	}
}

func TestValidatePull(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	org := func(p PullSpec) PoolSpec {
		s := poolTestSpec()
		s.Organization, s.Repository, s.Pull = "acme", "", &p
		return s.WithDefaults()
	}
	repo := func(p PullSpec) PoolSpec {
		s := poolTestSpec()
		s.Repository, s.Organization, s.Pull = "acme/app", "", &p
		return s.WithDefaults()
	}
	ent := func(p PullSpec) PoolSpec {
		s := poolTestSpec()
		s.Enterprise, s.Organization, s.Repository, s.Pull = "megacorp", "", "", &p
		return s.WithDefaults()
	}
	cases := []struct {
		name string
		spec PoolSpec
		errs []string // "path: type" of each error, in order
	}{
		{name: "organization pool with repositories", spec: org(PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app", "lib"}})},
		{name: "repository pool needs none", spec: repo(PullSpec{Metric: PullMetricQueuedJobs})},
		{name: "enterprise pool names owners", spec: ent(PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"acme/app"}})},
		{name: "busy metric with defaults", spec: org(PullSpec{Metric: PullMetricBusyPercentage})},
		{name: "busy metric with its own thresholds", spec: org(PullSpec{Metric: PullMetricBusyPercentage, ScaleUpThreshold: f(0.75),
			ScaleDownThreshold: f(0.25), ScaleUpFactor: f(2), ScaleDownFactor: f(0.5), Interval: &metav1.Duration{Duration: 30 * time.Second}})},
		{name: "no metric", spec: org(PullSpec{}), errs: []string{"spec.pull.metric: Required value"}},
		{name: "unknown metric", spec: org(PullSpec{Metric: "QueueLength"}), errs: []string{"spec.pull.metric: Unsupported value"}},
		{name: "interval too short", spec: repo(PullSpec{Metric: PullMetricQueuedJobs, Interval: &metav1.Duration{Duration: time.Second}}),
			errs: []string{"spec.pull.interval: Invalid value"}},
		{name: "organization pool without repositories", spec: org(PullSpec{Metric: PullMetricQueuedJobs}), errs: []string{"spec.pull.repositories: Required value"}},
		{name: "repository pool naming repositories", spec: repo(PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app"}}),
			errs: []string{"spec.pull.repositories: Forbidden"}},
		{name: "organization repository with an owner", spec: org(PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app", "acme/lib"}}),
			errs: []string{"spec.pull.repositories[1]: Invalid value"}},
		{name: "duplicate repository", spec: org(PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app", "App"}}),
			errs: []string{"spec.pull.repositories[1]: Duplicate value"}},
		{name: "enterprise repository without an owner", spec: ent(PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app"}}),
			errs: []string{"spec.pull.repositories[0]: Invalid value"}},
		{name: "too many repositories", spec: org(PullSpec{Metric: PullMetricQueuedJobs, Repositories: strings.Split(strings.Repeat("r,", MaxPullRepositories)+"last", ",")}),
			errs: []string{"spec.pull.repositories: Too many"}},
		{name: "thresholds on the queued metric", spec: repo(PullSpec{Metric: PullMetricQueuedJobs, ScaleUpFactor: f(2)}),
			errs: []string{"spec.pull.scaleUpFactor: Forbidden"}},
		{name: "repositories on the busy metric", spec: org(PullSpec{Metric: PullMetricBusyPercentage, Repositories: []string{"app"}}),
			errs: []string{"spec.pull.repositories: Forbidden"}},
		{name: "threshold outside (0, 1]", spec: org(PullSpec{Metric: PullMetricBusyPercentage, ScaleUpThreshold: f(1.5)}),
			errs: []string{"spec.pull.scaleUpThreshold: Invalid value"}},
		{name: "down threshold not below up", spec: org(PullSpec{Metric: PullMetricBusyPercentage, ScaleUpThreshold: f(0.5), ScaleDownThreshold: f(0.5)}),
			errs: []string{"spec.pull.scaleDownThreshold: Invalid value"}},
		{name: "factors that do not grow and shrink", spec: org(PullSpec{Metric: PullMetricBusyPercentage, ScaleUpFactor: f(1), ScaleDownFactor: f(1.2)}),
			errs: []string{"spec.pull.scaleUpFactor: Invalid value", "spec.pull.scaleDownFactor: Invalid value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := c.spec.Validate(field.NewPath("spec"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+": "+string(e.Type.String()))
			}
			if strings.Join(got, "\n") != strings.Join(c.errs, "\n") {
				t.Errorf("errors:\n%v\nwant:\n%v\n(%v)", got, c.errs, errs)
			}
		})
	}
}
