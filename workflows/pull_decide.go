package workflows

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// PullDecideInput is everything the pull's part of a pool's decision depends on.
type PullDecideInput struct {
	Now  time.Time
	Pool string
	// Spec is the pool's pull section (after WithDefaults).
	Spec   PullSpec
	Bounds Bounds
	// Runners are the pool's runners; Reserved its reservation book (the webhooks' word).
	Runners  []PoolRunner
	Reserved ReservationState
	// Repos are GitHub's last answers (PullMetricQueuedJobs), read at ReadAt; Finished are the
	// pool's recently ended runners.
	Repos    []PulledRepo
	ReadAt   time.Time
	Finished []FinishedRunner
	// Target is the busy metric's last target; Evaluate asks for a new one (a pull is due).
	Target   int
	Evaluate bool
}

// DecidePull computes the demand of a pool with a pull section. Every job is counted once,
// whichever source told of it:
//   - jobs that need a runner ("waiting"): the queued jobs GitHub listed (the pull) and the
//     jobs holding a reservation (the webhooks), as one set by job id, less the jobs a runner
//     of the pool runs (its reported job, or the runner GitHub names on an in-progress job)
//     and the jobs the webhooks said are over or served elsewhere (the reservation book's
//     released jobs; the pull may be older than that news);
//   - busy runners hold their job; a busy runner whose job is unknown (it took a job after
//     the pull read, and its in_progress webhook did not come) is taken to serve one of the
//     waiting jobs, and so is a runner that ended since the read (an ephemeral runner that
//     ran one of them between two reads), so a stale answer starts no runner for a job that
//     already had one. At worst a waiting job so waits for the next read.
//
// PullMetricQueuedJobs: want = max(min + busy + waiting, busy + minIdle), as Decide counts
// reservations and busy runners. PullMetricBusyPercentage: at each pull the target becomes
// ceil(online × scaleUpFactor) when the share of online runners that are busy is at or above
// scaleUpThreshold, floor(online × scaleDownFactor) at or below scaleDownThreshold, else the
// online count, within min and max; it is held while runners are still starting (they would
// read as idle) and falls to min with no runner online. want = max(target, busy + waiting from
// reservations, busy + minIdle): the webhooks' jobs are served even between two reads.
func DecidePull(in PullDecideInput) Demand {
	c := countPull(in)
	if in.Spec.Metric == PullMetricBusyPercentage {
		return decideBusy(in, c)
	}
	want := max(in.Bounds.Min+c.busy+c.waiting, c.busy+in.Bounds.MinIdle)
	why := fmt.Sprintf("pull: want %d = max(min %d + busy %d + waiting %d, busy %d + minIdle %d) (GitHub queued %d, reservations %d)",
		want, in.Bounds.Min, c.busy, c.waiting, c.busy, in.Bounds.MinIdle, c.pulledQueued, c.reserved)
	if staying := c.online + c.starting; c.unread > 0 && staying > want {
		// Jobs on a page not read may wait for these runners: hold them, never drain on it.
		want = staying
		why += fmt.Sprintf("; held at the %d runners: %d run(s) have jobs on pages not read", staying, c.unread)
	}
	return Demand{Want: want, Why: why}
}

// pullCounts are the counts DecidePull reads from the runners, the book and the answers.
type pullCounts struct {
	busy, waiting, pulledQueued, reserved int
	// unread counts the runs with pages the answers do not hold (PulledRun.Unread).
	unread int
	// online and starting count the runners that stay (not leaving): online ones (idle or
	// busy) and those not online yet; busyOnline the busy among the online.
	online, starting, busyOnline int
}

func countPull(in PullDecideInput) pullCounts {
	var c pullCounts
	running := map[int64]bool{}    // jobs the pool's runners run
	runsNamed := map[string]bool{} // runners GitHub names on an in-progress job
	var queued []int64
	for _, repo := range in.Repos {
		for _, run := range repo.Runs {
			if run.Unread {
				c.unread++
			}
			for _, j := range run.AllJobs() {
				switch {
				case j.Status == JobQueued:
					queued = append(queued, j.ID)
				case j.RunnerName != "" && in.findRunner(j.RunnerName):
					running[j.ID], runsNamed[j.RunnerName] = true, true
				}
			}
		}
	}
	unknownBusy := 0
	for _, r := range in.Runners {
		if r.State.Terminal() {
			continue
		}
		if r.JobID != 0 {
			running[r.JobID] = true
		}
		busy := r.State == RunnerBusy || r.Busy || runsNamed[r.Name]
		if busy {
			c.busy++
			if r.JobID == 0 && !runsNamed[r.Name] {
				unknownBusy++
			}
		}
		c.countStaying(r, busy)
	}
	waiting := map[int64]bool{}
	for _, res := range in.Reserved.Reservations {
		if res.ExpiresAt.After(in.Now) && !running[res.JobID] {
			waiting[res.JobID] = true
			c.reserved++
		}
	}
	if in.Spec.Metric != PullMetricBusyPercentage {
		for _, id := range queued {
			if !running[id] && !in.released(id) {
				waiting[id] = true
				c.pulledQueued++
			}
		}
	}
	served := unknownBusy
	if in.Spec.Metric != PullMetricBusyPercentage {
		served += in.endedSinceRead(runsNamed)
	}
	c.waiting = max(len(waiting)-served, 0)
	return c
}

func (c *pullCounts) countStaying(r PoolRunner, busy bool) {
	if r.Draining || r.State == RunnerDraining || r.Removing {
		return
	}
	switch {
	case busy:
		c.online++
		c.busyOnline++
	case r.State == RunnerIdle:
		c.online++
	default:
		c.starting++
	}
}

// endedSinceRead counts the runners that ended done after the read without GitHub naming
// them on a job in it.
func (in PullDecideInput) endedSinceRead(named map[string]bool) int {
	n := 0
	for _, f := range in.Finished {
		if f.State == RunnerDone && f.At.After(in.ReadAt) && !named[f.Name] {
			n++
		}
	}
	return n
}

func (in PullDecideInput) findRunner(name string) bool {
	return slices.ContainsFunc(in.Runners, func(r PoolRunner) bool { return r.Name == name })
}

func (in PullDecideInput) released(job int64) bool {
	return slices.ContainsFunc(in.Reserved.Released, func(r ReleasedJob) bool { return r.JobID == job })
}

func decideBusy(in PullDecideInput, c pullCounts) Demand {
	target, how := in.Target, "kept"
	switch {
	case in.Evaluate && c.starting > 0:
		how = fmt.Sprintf("kept: %d runner(s) starting would read as idle", c.starting)
	case in.Evaluate:
		target, how = busyTarget(in.Spec, c)
		target = min(max(target, in.Bounds.Min), in.Bounds.Max)
	}
	want := max(target, c.busy+c.waiting, c.busy+in.Bounds.MinIdle)
	return Demand{Want: want, Target: target, Why: fmt.Sprintf(
		"pull: want %d = max(target %d (%s), busy %d + waiting %d, busy %d + minIdle %d)",
		want, target, how, c.busy, c.waiting, c.busy, in.Bounds.MinIdle)}
}

// busyTarget is ARC's PercentageRunnersBusy step from the runners online now.
func busyTarget(spec PullSpec, c pullCounts) (int, string) {
	up, down := derefOr(spec.ScaleUpThreshold, DefaultPullScaleUpThreshold), derefOr(spec.ScaleDownThreshold, DefaultPullScaleDownThreshold)
	upF, downF := derefOr(spec.ScaleUpFactor, DefaultPullScaleUpFactor), derefOr(spec.ScaleDownFactor, DefaultPullScaleDownFactor)
	if c.online == 0 {
		return 0, "no runner online"
	}
	share := float64(c.busyOnline) / float64(c.online)
	switch {
	case share >= up:
		return int(math.Ceil(float64(c.online) * upF)), fmt.Sprintf("%d of %d busy >= %g: × %g", c.busyOnline, c.online, up, upF)
	case share <= down:
		return int(math.Floor(float64(c.online) * downF)), fmt.Sprintf("%d of %d busy <= %g: × %g", c.busyOnline, c.online, down, downF)
	}
	return c.online, fmt.Sprintf("%d of %d busy: between thresholds", c.busyOnline, c.online)
}

func derefOr(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}
