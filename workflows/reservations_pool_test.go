package workflows

import (
	"testing"
	"time"
)

// A batch that reaches the pool late (its pool could not run for a while) holds capacity only
// for what is left of its events' durations, counted from their own times: a job queued 15
// minutes before the pool took its event reserves nothing; one queued 2 minutes before keeps 8.
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
		h.check(21*time.Minute, "one reservation, expiring 10 minutes after its job queued", func(st PoolStatus) bool {
			return st.Reservations == 1 && len(st.Reserved) == 1 && st.Reserved[0].JobID == 12 &&
				st.Reserved[0].ExpiresAt.Equal(batch.Events[1].At.Add(d)) && len(st.Runners) == 1
		})
		h.check(29*time.Minute, "the reservation has expired 8 minutes after the pool took it", func(st PoolStatus) bool {
			return st.Reservations == 0
		})
		h.run(spec, 30*time.Minute)
	}
}
