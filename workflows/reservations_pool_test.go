package workflows

import (
	"fmt"
	"testing"
	"time"
)

// A batch that reaches the pool late (its pool could not run for a while) holds capacity only
// for what is left of its events' durations, counted from their own times: a job queued 2
// minutes before the pool took its event keeps 8; one queued 15 minutes before (past its
// duration) is held LateReservationHold, long enough for the pool to start its runner.
func TestPoolCountsReservationsFromTheirEventsOwnTimes(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		h := newPoolHarness(t, canAfter)
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
		d := spec.ReservationDurationOrDefault()
		took := h.start.Add(20 * time.Minute)
		batch := reserve(JobQueued, 11, 12)
		batch.Events[0].At = took.Add(-15 * time.Minute)
		batch.Events[1].At = took.Add(-2 * time.Minute)
		h.at(20*time.Minute, func() { h.signal(SignalReservations, batch) })
		h.check(21*time.Minute, "both reserved, each expiring from its job's own time (or the late hold)", func(st PoolStatus) bool {
			return st.Reservations == 2 && len(st.Reserved) == 2 && len(st.Runners) == 2 &&
				near(st.Reserved[0].ExpiresAt, took.Add(LateReservationHold)) && // took: as the harness delivers it
				st.Reserved[1].ExpiresAt.Equal(batch.Events[1].At.Add(d))
		})
		h.check(25*time.Minute, "the late job's hold is over, its runner kept by the scale-down delay; the other's reservation stands", func(st PoolStatus) bool {
			return st.Reservations == 1 && len(st.Reserved) == 1 && st.Reserved[0].JobID == 12 && len(st.Runners) == 2
		})
		h.check(29*time.Minute, "the reservation has expired 8 minutes after the pool took it", func(st PoolStatus) bool {
			return st.Reservations == 0
		})
		h.run(spec, 30*time.Minute)
	}
}

// near is true when a and b are within a second (the harness delivers each message on an
// instant of its own, microseconds after the one it was scheduled for).
func near(a, b time.Time) bool { return a.Sub(b).Abs() < time.Second }

// A reservation whose runner is still registering when its time is up (the API server was
// down, say) waits for it: the job is still queued at GitHub, and dropping the reservation
// would drain the one runner it waits for. Once the runner is online the clock runs again,
// so a job whose completion never arrives still gives its capacity back.
func TestPoolReservationsWaitForTheirRunnersToComeOnline(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			d := spec.ReservationDurationOrDefault()
			first, second := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2)
			h.silence(first)
			h.silence(second)
			h.at(time.Minute, func() { h.signal(SignalReservations, reserve(JobQueued, 11, 12)) })
			h.check(time.Minute+d+time.Minute, "both reservations renewed while their runners register", func(st PoolStatus) bool {
				return st.Reservations == 2 && st.Desired == 2 && len(st.Runners) == 2 &&
					countState(st, RunnerPending, st.TemplateHash) == 2
			})
			h.at(15*time.Minute, func() { h.report(first, RunnerIdle, "") })
			h.check(time.Minute+2*d+time.Minute, "one runner online: one reservation ran out, the other still waits", func(st PoolStatus) bool {
				return st.Reservations == 1 && len(st.Reserved) == 1 && st.Reserved[0].JobID == 12
			})
			end := h.run(spec, time.Minute+2*d+2*time.Minute)
			if end.Totals.Started != 2 || end.Totals.Failed != 0 {
				t.Errorf("totals %+v, want the 2 runners started and none failed", end.Totals)
			}
		})
	}
}

// Jobs 101 and 102 queue through an outage; runner B comes online first and GitHub hands it
// 102, while A still registers for 101. When 101's reservation is up, 101 is the lowest job id
// but no runner is there for it: B serves 102. It keeps its reservation (and A), and 102's
// reservation, served, expires into B's count: desired stays 2 until A takes 101. Across
// continue-as-new.
func TestPoolKeepsTheReservationOfAJobWhoseRunnerStillRegisters(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			d := spec.ReservationDurationOrDefault()
			a, b := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2)
			h.silence(a)
			h.silence(b)
			h.at(time.Minute, func() { h.signal(SignalReservations, reserve(JobQueued, 101)) })
			h.at(2*time.Minute, func() { h.signal(SignalReservations, reserve(JobQueued, 102)) })
			h.at(5*time.Minute, func() { h.takeJob(b, 102) })
			h.check(time.Minute+d+30*time.Second, "job 101's reservation kept while its runner registers", func(st PoolStatus) bool {
				return st.Reservations == 2 && st.Desired == 2 && len(st.Reserved) == 2 && st.Reserved[0].JobID == 101
			})
			h.check(2*time.Minute+d+30*time.Second, "102's served reservation expired; B counts for its job, A is kept", func(st PoolStatus) bool {
				return st.Reservations == 1 && st.Reserved[0].JobID == 101 && st.Desired == 2 && drainingRunners(st) == 0
			})
			h.at(14*time.Minute, func() { h.takeJob(a, 101) })
			end := h.run(spec, 2*d+5*time.Minute)
			if end.Desired != 2 || len(end.Runners) != 2 || drainingRunners(end) != 0 || h.stats.drained != 0 {
				t.Errorf("at the end: desired %d, runners %s, drained %d; want both runners kept busy", end.Desired, describeRunners(end), h.stats.drained)
			}
		})
	}
}

// takeJob plays GitHub handing the job to a runner that has just come online.
func (h *poolHarness) takeJob(name string, job int64) {
	h.mu.Lock()
	r := h.sim[name]
	r.state, r.busy, r.job = RunnerBusy, true, job
	h.mu.Unlock()
	h.report(name, RunnerBusy, "")
}

func drainingRunners(st PoolStatus) int {
	n := 0
	for _, r := range st.Runners {
		if r.Draining {
			n++
		}
	}
	return n
}
