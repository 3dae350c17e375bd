package workflows

import (
	"slices"
	"time"
)

// ReservationParams are the pool's settings that a reservation batch is applied under.
type ReservationParams struct {
	// Now is the workflow time the batch is applied at (workflow.Now, never the wall clock).
	Now time.Time
	// Duration is how long a new reservation holds capacity; zero means
	// DefaultReservationDuration.
	Duration time.Duration
	// MaxReplicas is how many reservations the pool can serve at once. Reservations beyond it
	// are waiting for capacity and get their expiry clock restarted, so a long backlog does not
	// expire while it waits. A negative value means no limit.
	MaxReplicas int
	// EventTimes makes a queued job's reservation count its duration from its event's own
	// time (WorkflowJobEvent.At, never later than Now) instead of from Now. False keeps the
	// old rule (histories recorded before it).
	EventTimes bool
	// ServingRunners, with WaitForRunners, is how many of the pool's runners are online (idle,
	// or busy with one of the pool's own jobs) to serve its reservations.
	ServingRunners int
	// WaitForRunners renews, instead of dropping, a reservation that expires beyond the
	// first ServingRunners in job-id order: no runner of the pool was online to take its job
	// (its runner is still registering, say through an API-server outage), so the job is
	// most likely still queued at GitHub, and dropping it would take away the runner it
	// waits for. False keeps the old rule (histories recorded before it).
	WaitForRunners bool
	// RenewUnserved replaces WaitForRunners' rule (changeRenewUnserved): a reservation is
	// matched with what serves it, not counted against runners in job-id order. The
	// reservations of ServedJobs (jobs busy runners of the pool hold) are served and expire
	// as usual: the busy runner counts for its job from then on (the pool's busyElsewhere).
	// The others compete, in job-id order, for the IdleRunners: the first IdleRunners of them
	// expire as usual (a runner was online and free for them, and GitHub hands a queued job
	// to a fitting idle runner within seconds); the expired ones beyond restart their clocks
	// and count the renewal (Reservation.Renewals): no runner was there to take their jobs.
	RenewUnserved bool
	ServedJobs    []int64
	IdleRunners   int
	// Pool is the pool whose book this is. When set, an in_progress event naming a runner that
	// is not one of this pool's ends the job's reservation here: another pool's runner (or a
	// runner runnerflow does not run) took the job, so no runner of this pool will. Empty keeps
	// the rule off (histories recorded before the rule existed).
	Pool string
}

// Active counts the reservations that still hold capacity at now. A reservation expiring
// exactly at now no longer counts: its time is up.
func (s ReservationState) Active(now time.Time) int {
	n := 0
	for _, r := range s.Reservations {
		if r.ExpiresAt.After(now) {
			n++
		}
	}
	return n
}

// Holds reports whether the job has a reservation that still holds capacity at now.
func (s ReservationState) Holds(job int64, now time.Time) bool {
	return slices.ContainsFunc(s.Reservations, func(r Reservation) bool { return r.JobID == job && r.ExpiresAt.After(now) })
}

// ApplyReservationBatch applies one scale window's events to the pool's reservation book and
// returns the new book and what changed. It is pure: the input state is not modified, and the
// output slices are sorted by job id.
//
// The rules, keyed by job so that duplicated or reordered webhooks cannot skew the count:
//   - queued reserves capacity for that job, once: a second queued event for a job that holds a
//     reservation, or whose completion was already seen, adds nothing. With EventTimes, the
//     reservation's duration counts from the event's own time (its At, or Now if At is zero or
//     later than Now), so a batch that reaches the pool late holds capacity only for what is
//     left of its events' durations, and at least LateReservationHold (or the duration, if
//     shorter) after Now: long enough for the pool to start the job's runner, never long
//     enough to hold a lost completion's capacity for the whole time the batch waited;
//   - completed removes that job's own reservation (never another job's) and remembers the job
//     for ReleasedJobMemory, so a queued event delivered after its completion adds nothing;
//   - waiting changes nothing: a waiting job cannot use a runner until it is approved (GitHub
//     then sends queued);
//   - in_progress on one of this pool's runners changes nothing here: the job keeps its
//     reservation until it completes or the runner that runs it leaves it (the pool ends it
//     then, from the runner's report); in_progress on any other runner ends the reservation
//     (with Pool set), because the job is served elsewhere;
//   - reservations whose expiry is at or before Now are dropped, except, with WaitForRunners,
//     those beyond the first ServingRunners in job-id order, or, with RenewUnserved, those
//     no busy runner serves beyond the first IdleRunners of them: they restart their clock
//     from Now with their own duration, as they wait for a runner to come online;
//   - reservations beyond MaxReplicas, in job-id order (GitHub's job ids grow with queue time,
//     so the oldest jobs are the ones being served), restart their expiry clock from Now with
//     their own original duration, as ARC does for a backlog beyond maxReplicas.
//
// ARC's rule that a completed job with conclusion "skipped", or "success" without a runner,
// releases nothing exists because ARC releases the oldest reservation of any job: such jobs
// never queued for a runner, so releasing on them would free capacity another job holds. Here
// a completion can only ever remove its own job's reservation, which satisfies that rule; if
// such a job does hold a reservation (its queued event did arrive), the job is over and will
// never use the capacity, so that one reservation is released rather than left to expire.
// An empty batch still drops expired reservations and restarts the clocks of waiting ones, so
// the pool may call it on a timer.
func ApplyReservationBatch(state ReservationState, batch ReservationBatch, p ReservationParams) (ReservationState, ReservationBatchResult) {
	if p.Duration <= 0 {
		p.Duration = DefaultReservationDuration
	}
	book := newReservationBook(state, p.Now)
	var res ReservationBatchResult
	for _, ev := range batch.Events {
		if ev.JobID <= 0 {
			continue // not a job GitHub could have sent; nothing to key a reservation on
		}
		switch ev.Action {
		case JobQueued:
			if book.reserve(ev.JobID, reservationExpiry(ev, p), p.Duration, ev.Repository) {
				res.Added++
			}
		case JobCompleted:
			if book.release(ev.JobID, p.Now) {
				res.Released++
			}
		case JobInProgress:
			if servedElsewhere(ev, p.Pool) && book.release(ev.JobID, p.Now) {
				res.Released++
			}
		}
	}
	if p.RenewUnserved {
		res.Renewed = book.renewUnserved(p)
	} else {
		res.Renewed = book.renewWaiting(p)
	}
	res.Expired = book.dropExpired(p.Now)
	book.rebaseBeyond(p)
	out := book.state()
	res.Active = out.Active(p.Now)
	return out, res
}

// hasEventTimes reports whether a batch has a queued event that carries its own time, the
// only case where EventTimes changes what the batch does.
func hasEventTimes(batch ReservationBatch) bool {
	return slices.ContainsFunc(batch.Events, func(ev WorkflowJobEvent) bool { return ev.Action == JobQueued && !ev.At.IsZero() })
}

// servedElsewhere reports whether an in_progress event names a runner that is not one of
// pool's. An event that names no runner says nothing about who serves the job.
func servedElsewhere(ev WorkflowJobEvent, pool string) bool {
	if pool == "" || ev.RunnerName == "" {
		return false
	}
	owner, ok := PoolFromRunnerName(ev.RunnerName)
	return !ok || owner != pool
}

// reservationBook is the working copy of a ReservationState while a batch is applied. The
// maps only answer "is this job here"; output order comes from sorting, never from the maps.
type reservationBook struct {
	reservations map[int64]Reservation
	released     map[int64]ReleasedJob
}

// newReservationBook copies the state and forgets released jobs whose memory has run out.
func newReservationBook(s ReservationState, now time.Time) *reservationBook {
	b := &reservationBook{
		reservations: make(map[int64]Reservation, len(s.Reservations)),
		released:     make(map[int64]ReleasedJob, len(s.Released)),
	}
	for _, r := range s.Reservations {
		b.reservations[r.JobID] = r
	}
	for _, j := range s.Released {
		if j.ForgetAt.After(now) {
			b.released[j.JobID] = j
		}
	}
	return b
}

// reservationExpiry is when a queued event's reservation expires: Duration after Now, or with
// EventTimes Duration after the event's own time (never later than Now: a clock ahead of the
// pool's must not extend a reservation either), but no sooner than LateReservationHold after
// Now (nor later than a fresh reservation's): a job queued while its pool could not run, for
// longer than the duration, still gets the runner it waits for at GitHub.
func reservationExpiry(ev WorkflowJobEvent, p ReservationParams) time.Time {
	fresh := p.Now.Add(p.Duration)
	if !p.EventTimes || ev.At.IsZero() || ev.At.After(p.Now) {
		return fresh
	}
	floor := p.Now.Add(min(LateReservationHold, p.Duration))
	return maxTime(ev.At.Add(p.Duration), floor)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reserve adds a reservation for the job, expiring at expires with duration d (kept for a
// restarted clock), unless it already holds one or has completed.
func (b *reservationBook) reserve(job int64, expires time.Time, d time.Duration, repo string) bool {
	if _, ok := b.reservations[job]; ok {
		return false
	}
	if _, ok := b.released[job]; ok {
		return false
	}
	b.reservations[job] = Reservation{JobID: job, ExpiresAt: expires, Duration: d, Repository: repo}
	return true
}

// release removes the job's own reservation, if any, and remembers the job as completed. It
// reports whether a reservation was removed.
func (b *reservationBook) release(job int64, now time.Time) bool {
	_, had := b.reservations[job]
	delete(b.reservations, job)
	if _, ok := b.released[job]; !ok {
		b.released[job] = ReleasedJob{JobID: job, ForgetAt: now.Add(ReleasedJobMemory)}
	}
	return had
}

// dropExpired removes reservations whose time is up and returns how many.
func (b *reservationBook) dropExpired(now time.Time) int {
	n := 0
	for _, job := range sortedKeys64(b.reservations) {
		if r := b.reservations[job]; !r.ExpiresAt.After(now) {
			delete(b.reservations, job)
			n++
		}
	}
	return n
}

// renewWaiting restarts the expiry clock of the expired reservations beyond the first
// ServingRunners in job-id order (with WaitForRunners) and returns how many.
func (b *reservationBook) renewWaiting(p ReservationParams) int {
	if !p.WaitForRunners || len(b.reservations) <= p.ServingRunners {
		return 0
	}
	n := 0
	jobs := sortedKeys64(b.reservations)
	for _, job := range jobs[max(p.ServingRunners, 0):] {
		r := b.reservations[job]
		if r.ExpiresAt.After(p.Now) {
			continue
		}
		if r.Duration <= 0 {
			r.Duration = p.Duration // a record without its duration: give it the pool's
		}
		r.ExpiresAt = p.Now.Add(r.Duration)
		b.reservations[job] = r
		n++
	}
	return n
}

// renewUnserved restarts the expiry clock of the expired reservations that no busy runner
// serves, beyond the first IdleRunners of them in job-id order (RenewUnserved), counts the
// renewal on each, and returns how many.
func (b *reservationBook) renewUnserved(p ReservationParams) int {
	n := 0
	for _, job := range unservedBeyondIdle(sortedKeys64(b.reservations), p.ServedJobs, p.IdleRunners) {
		r := b.reservations[job]
		if r.ExpiresAt.After(p.Now) {
			continue
		}
		if r.Duration <= 0 {
			r.Duration = p.Duration // a record without its duration: give it the pool's
		}
		r.ExpiresAt = p.Now.Add(r.Duration)
		r.Renewals++
		b.reservations[job] = r
		n++
	}
	return n
}

// unservedBeyondIdle returns the jobs (sorted) that no busy runner serves, without the
// first idle of them: the reservations no runner is online for.
func unservedBeyondIdle(jobs, served []int64, idle int) []int64 {
	var out []int64
	for _, job := range jobs {
		if slices.Contains(served, job) {
			continue
		}
		if idle > 0 {
			idle--
			continue
		}
		out = append(out, job)
	}
	return out
}

// WaitsUnserved reports whether an expired reservation is one no busy runner serves (its
// job not in served) beyond the first idle such reservations in job-id order: the only case
// where ReservationParams.RenewUnserved changes what a batch does.
func (s ReservationState) WaitsUnserved(now time.Time, served []int64, idle int) bool {
	jobs := make([]int64, 0, len(s.Reservations))
	expired := make(map[int64]bool, len(s.Reservations))
	for _, r := range s.Reservations { // sorted by job id
		jobs = append(jobs, r.JobID)
		expired[r.JobID] = !r.ExpiresAt.After(now)
	}
	return slices.ContainsFunc(unservedBeyondIdle(jobs, served, idle), func(job int64) bool { return expired[job] })
}

// WaitsForRunner reports whether an expired reservation lies beyond the first serving
// reservations in job-id order: the only case where ReservationParams.WaitForRunners
// changes what a batch does.
func (s ReservationState) WaitsForRunner(now time.Time, serving int) bool {
	for i, r := range s.Reservations { // sorted by job id
		if i >= serving && !r.ExpiresAt.After(now) {
			return true
		}
	}
	return false
}

// rebaseBeyond restarts the expiry clock of the reservations beyond MaxReplicas in job-id
// order, each with its own original duration.
func (b *reservationBook) rebaseBeyond(p ReservationParams) {
	if p.MaxReplicas < 0 || len(b.reservations) <= p.MaxReplicas {
		return
	}
	jobs := sortedKeys64(b.reservations)
	for _, job := range jobs[p.MaxReplicas:] {
		r := b.reservations[job]
		if r.Duration <= 0 {
			r.Duration = p.Duration // a record without its duration: give it the pool's
		}
		r.ExpiresAt = p.Now.Add(r.Duration)
		b.reservations[job] = r
	}
}

// state returns the book as a ReservationState with slices sorted by job id.
func (b *reservationBook) state() ReservationState {
	var s ReservationState
	for _, job := range sortedKeys64(b.reservations) {
		s.Reservations = append(s.Reservations, b.reservations[job])
	}
	for _, job := range sortedKeys64(b.released) {
		s.Released = append(s.Released, b.released[job])
	}
	return s
}

// sortedKeys64 returns a map's keys in ascending order, so nothing depends on map order.
func sortedKeys64[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	//workflowcheck:ignore the keys are sorted below, so the map's order never shows
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
