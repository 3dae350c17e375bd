package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// A pool's reservation book is its own, whatever its source of demand: the scale windows' batches
// (reserve) and the runners' reports (endJob) keep it, and Decide or the pull counts it. This
// file is the pool's side of it; the book's rules are pure (reservations.go).

// Pool change ids of the reservation book (workflow.GetVersion); what each changes is in
// Changes (changes.go).
const (
	changeEndJobWithRunner           = "end-job-with-runner"
	changeReservationsFromEventTimes = "reservations-from-event-times"
	changeReservationsWaitForRunners = "reservations-wait-for-runners"
	changeRenewUnserved              = "reservations-renew-unserved"
)

// pruneReservations drops expired reservations (and restarts the clocks of those waiting
// beyond max) once one has expired, so the carried state does not grow.
func (p *poolRun) pruneReservations(now time.Time) {
	for _, r := range p.st.Reserved.Reservations {
		if !r.ExpiresAt.After(now) {
			p.st.Reserved, _ = ApplyReservationBatch(p.st.Reserved, ReservationBatch{}, p.reservationParams(now))
			return
		}
	}
}

// runnersKnowJobs is true once a runner reported its job (runner code that reports jobs).
func (p *poolRun) runnersKnowJobs() bool {
	return slices.ContainsFunc(p.st.Runners, func(r PoolRunner) bool { return r.JobID != 0 })
}

// busyElsewhere counts busy runners whose job holds no active reservation here: another pool's
// job (its labels fit this pool's runners too), one whose queued event has not arrived yet, or
// one that outlived its reservation. With the reservations, every running job is counted
// exactly once — through its reservation or through its runner — so none of them is taken for
// free capacity and none is counted twice.
func (p *poolRun) busyElsewhere(now time.Time) int {
	n := 0
	for _, r := range p.st.Runners {
		if r.JobID != 0 && r.Busy && !r.JobDone && !r.State.Terminal() && !p.st.Reserved.Holds(r.JobID, now) {
			n++
		}
	}
	return n
}

func (p *poolRun) reservationParams(now time.Time) ReservationParams {
	params := ReservationParams{Now: now, Duration: p.st.Spec.ReservationDurationOrDefault(), MaxReplicas: p.bounds(now).Max}
	// Asked only when a reservation would expire with no runner online for it (by either
	// rule), so histories in which none did carry no marker.
	served, idle, serving := p.servedJobs(), p.idleRunners(), p.servingRunners(now)
	waitsOld := p.st.Reserved.WaitsForRunner(now, serving)
	if !waitsOld && !p.st.Reserved.WaitsUnserved(now, served, idle) {
		return params
	}
	if workflow.GetVersion(p.ctx, changeRenewUnserved, workflow.DefaultVersion, 1) >= 1 {
		params.RenewUnserved, params.ServedJobs, params.IdleRunners = true, served, idle
		return params
	}
	if waitsOld && workflow.GetVersion(p.ctx, changeReservationsWaitForRunners, workflow.DefaultVersion, 1) >= 1 {
		params.WaitForRunners = true
		params.ServingRunners = serving
	}
	return params
}

// servedJobs are the jobs that busy runners of the pool hold: their reservations are served
// (changeRenewUnserved).
func (p *poolRun) servedJobs() []int64 {
	var jobs []int64
	for _, r := range p.st.Runners {
		if r.Busy && r.JobID != 0 && !r.State.Terminal() {
			jobs = append(jobs, r.JobID)
		}
	}
	return jobs
}

// idleRunners counts the runners online and free to take a job: idle, not leaving. A busy
// runner whose job the pool does not know is not free, and is not counted for any
// reservation either (changeRenewUnserved).
func (p *poolRun) idleRunners() int {
	n := 0
	for _, r := range p.st.Runners {
		if r.State == RunnerIdle && !r.Draining && !r.Removing {
			n++
		}
	}
	return n
}

// servingRunners counts the runners online to serve this pool's reservations: idle ones not
// leaving, and busy ones whose job is not another pool's (busyElsewhere). The rule before
// changeRenewUnserved, kept for the histories that took it.
func (p *poolRun) servingRunners(now time.Time) int {
	n := 0
	for _, r := range p.st.Runners {
		if (r.State == RunnerIdle || r.State == RunnerBusy) && !r.Draining && !r.Removing {
			n++
		}
	}
	return max(n-p.busyElsewhere(now), 0)
}

// reserve applies one scale window's batch of workflow_job events to the reservation book.
func (p *poolRun) reserve(_ workflow.Context, batch ReservationBatch) (ReservationBatchResult, error) {
	now := workflow.Now(p.ctx)
	var res ReservationBatchResult
	params := p.reservationParams(now)
	if hasAction(batch, JobInProgress) && workflow.GetVersion(p.ctx, changeEndJobWithRunner, workflow.DefaultVersion, 1) >= 1 {
		params.Pool = p.st.Spec.Name
	}
	if hasEventTimes(batch) && workflow.GetVersion(p.ctx, changeReservationsFromEventTimes, workflow.DefaultVersion, 1) >= 1 {
		params.EventTimes = true
	}
	named := endsNamedByEvents(p.st, batch, now)
	p.st.Reserved, res = ApplyReservationBatch(p.st.Reserved, batch, params)
	if params.Pool != "" {
		p.tieJobsInProgress(batch)
	}
	p.liftEndsNamedByEvents(named, now)
	p.markJobsDone(batch)
	p.measureJobsTakenEarly(batch, now)
	p.observePrewarm(batch, now)
	p.changed = true
	return res, nil
}

// tieJobsInProgress applies the batch's in_progress events on this pool's own runners: the job
// is tied to its runner even when the runner's own notice is late (or never comes), so the
// runner's end ends the job's reservation; a job whose runner is already leaving or gone is
// over for the pool, so its reservation ends now.
func (p *poolRun) tieJobsInProgress(batch ReservationBatch) {
	for _, ev := range batch.Events {
		if ev.Action != JobInProgress || ev.JobID <= 0 || servedElsewhere(ev, p.st.Spec.Name) || ev.RunnerName == "" {
			continue
		}
		i := p.find(ev.RunnerName)
		if i < 0 {
			p.endJob(&PoolRunner{JobID: ev.JobID})
			continue
		}
		r := &p.st.Runners[i]
		if r.JobID == 0 {
			r.JobID = ev.JobID
			p.jobTaken(r.JobID, workflow.Now(p.ctx))
		}
		if r.State == RunnerDraining && !r.Busy {
			p.endJob(r)
		}
	}
}

// changeCompletedRunnerLeaves gates markJobsDone. Asked only when a completed event names one
// of an ephemeral pool's runners that is not leaving yet.
const changeCompletedRunnerLeaves = "completed-runner-leaves"

// markJobsDone marks the ephemeral runners that the batch's completed events name as leaving
// (JobDone). The event ends the job's reservation at once, while the runner's own end comes
// only after its cleanup (seconds, longer in a burst that queues Kubernetes writes behind the
// client's rate limit): counted as staying meanwhile, it made the desired count look exceeded,
// and scale-down drained a runner still starting for another job, which then waited for a
// replacement.
func (p *poolRun) markJobsDone(batch ReservationBatch) {
	var names []string
	for _, ev := range batch.Events {
		if ev.Action == JobCompleted && ev.RunnerName != "" {
			names = append(names, ev.RunnerName)
		}
	}
	p.markLeaving(names, func() bool {
		return workflow.GetVersion(p.ctx, changeCompletedRunnerLeaves, workflow.DefaultVersion, 1) >= 1
	})
}

// markLeaving counts the named runners, whose one job completed, as leaving (JobDone): only an
// ephemeral pool's, and only those not leaving for their job yet nor gone. inForce, the
// change that gates it, is asked only once there is such a runner.
func (p *poolRun) markLeaving(names []string, inForce func() bool) {
	if !p.st.Spec.IsEphemeral() {
		return
	}
	for _, name := range names {
		i := p.find(name)
		if i < 0 || p.st.Runners[i].JobDone || p.st.Runners[i].State.Terminal() {
			continue
		}
		if !inForce() {
			return
		}
		p.st.Runners[i].JobDone = true
	}
}

func hasAction(batch ReservationBatch, action string) bool {
	return slices.ContainsFunc(batch.Events, func(ev WorkflowJobEvent) bool { return ev.Action == action })
}

// endJob ends the reservation of the job the runner ran (if the pool knows it): the runner has
// left that job, so it needs no capacity any more, whether or not its completed webhook came.
// The job is remembered as done, so a late queued event for it reserves nothing.
func (p *poolRun) endJob(r *PoolRunner) {
	job := r.JobID
	r.JobID = 0
	p.endJobID(job)
}

// endJobID ends one job's reservation (see endJob).
func (p *poolRun) endJobID(job int64) {
	if job == 0 || workflow.GetVersion(p.ctx, changeEndJobWithRunner, workflow.DefaultVersion, 1) < 1 {
		return
	}
	now := workflow.Now(p.ctx)
	ended := ReservationBatch{Events: []WorkflowJobEvent{{JobID: job, Action: JobCompleted}}}
	p.st.Reserved, _ = ApplyReservationBatch(p.st.Reserved, ended, p.reservationParams(now))
}
