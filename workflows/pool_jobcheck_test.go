package workflows

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestPlanJobCheck(t *testing.T) {
	idle := func(name string, since time.Duration) PoolRunner {
		return PoolRunner{Name: name, State: RunnerIdle, Since: t0.Add(since)}
	}
	busy := func(name string, job int64) PoolRunner {
		return PoolRunner{Name: name, State: RunnerBusy, Busy: true, JobID: job, Since: t0}
	}
	reserved := func(jobs ...int64) ReservationState {
		var s ReservationState
		for _, j := range jobs {
			s.Reservations = append(s.Reservations, Reservation{JobID: j, ExpiresAt: t0.Add(time.Hour), Duration: time.Hour, Repository: "acme/app"})
		}
		return s
	}
	refs := func(jobs ...int64) []JobRef {
		var out []JobRef
		for _, j := range jobs {
			out = append(out, JobRef{ID: j, Repository: "acme/app"})
		}
		return out
	}
	many := make([]int64, ReservedJobCheckMax+5)
	for i := range many {
		many[i] = int64(100 + i)
	}
	tests := []struct {
		name     string
		runners  []PoolRunner
		reserved ReservationState
		next     time.Time
		want     jobCheck
	}{{
		name:     "no idle runner: every reservation may still be on its way to one",
		runners:  []PoolRunner{busy("a", 1), {Name: "b", State: RunnerRegistering, Since: t0}},
		reserved: reserved(1, 2),
	}, {
		name:     "an idle runner and a reservation no runner serves: due ReservedJobCheckAfter after the runner went idle",
		runners:  []PoolRunner{busy("a", 1), idle("b", 10*time.Second), idle("c", 5*time.Second)},
		reserved: reserved(1, 2, 3),
		want:     jobCheck{due: t0.Add(5*time.Second + ReservedJobCheckAfter), jobs: refs(2, 3)},
	}, {
		name:     "every reservation served by a runner: nothing to read",
		runners:  []PoolRunner{busy("a", 1), idle("b", 0)},
		reserved: reserved(1),
	}, {
		name:     "a draining idle runner is not waiting for a job",
		runners:  []PoolRunner{{Name: "b", State: RunnerIdle, Draining: true, Since: t0}},
		reserved: reserved(2),
	}, {
		name:     "not before the last check's interval",
		runners:  []PoolRunner{idle("b", 0)},
		reserved: reserved(2),
		next:     t0.Add(10 * time.Minute),
		want:     jobCheck{due: t0.Add(10 * time.Minute), jobs: refs(2)},
	}, {
		name:    "reservations without a repository or already expired are not read",
		runners: []PoolRunner{idle("b", 0)},
		reserved: ReservationState{Reservations: []Reservation{
			{JobID: 2, ExpiresAt: t0.Add(time.Hour)},
			{JobID: 3, ExpiresAt: t0.Add(-time.Second), Repository: "acme/app"},
			{JobID: 4, ExpiresAt: t0.Add(time.Hour), Repository: "acme/app"},
		}},
		want: jobCheck{due: t0.Add(ReservedJobCheckAfter), jobs: refs(4)},
	}, {
		name:     "at most ReservedJobCheckMax, the oldest jobs first",
		runners:  []PoolRunner{idle("b", 0)},
		reserved: reserved(many...),
		want:     jobCheck{due: t0.Add(ReservedJobCheckAfter), jobs: refs(many[:ReservedJobCheckMax]...)},
	}}
	for _, tt := range tests {
		got := planJobCheck(PoolState{Runners: tt.runners, Reserved: tt.reserved}, t0, tt.next)
		if !got.due.Equal(tt.want.due) || !slices.Equal(got.jobs, tt.want.jobs) {
			t.Errorf("%s: planJobCheck = %v %v, want %v %v", tt.name, got.due, got.jobs, tt.want.due, tt.want.jobs)
		}
	}
}

func TestJobReadingsAsEvents(t *testing.T) {
	got := jobReadingsAsEvents([]JobReading{
		{ID: 1, Status: JobQueued},
		{ID: 2, Status: JobCompleted, Conclusion: "success", RunnerName: "linux-abcd-1"},
		{ID: 3, Gone: true},
		{ID: 4, Status: JobInProgress, RunnerName: "other-abcd-1"},
		{ID: 5, Status: JobInProgress},
		{ID: 6, Status: JobWaiting},
	})
	want := []WorkflowJobEvent{
		{JobID: 2, Action: JobCompleted, Conclusion: "success", RunnerName: "linux-abcd-1"},
		{JobID: 3, Action: JobCompleted},
		{JobID: 4, Action: JobInProgress, RunnerName: "other-abcd-1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jobReadingsAsEvents = %+v, want %+v", got, want)
	}
}

// A job whose completed event was lost, and one another pool's runner took without its
// in_progress event reaching this pool, hold reservations that no runner serves while two of
// the pool's runners stand idle. A minute later the pool reads both jobs at GitHub and ends
// their reservations, so the idle runners go; a job GitHub still has queued keeps its
// reservation and is read again no sooner than ReservedJobCheckInterval. Across
// continue-as-new.
func TestPoolReadsReservedJobsNoRunnerServes(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			h.jobsAtGitHub = map[int64]JobReading{
				12: {ID: 12, Status: JobCompleted, Conclusion: "success"},
				13: {ID: 13, Status: JobInProgress, RunnerName: "other-abcd-1"},
			}
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			batch := reserve(JobQueued, 11, 12, 13, 14)
			for i := range batch.Events {
				batch.Events[i].Repository = "acme/app"
			}
			h.at(time.Minute, func() { h.signal(SignalReservations, batch) })
			h.at(2*time.Minute, func() { h.startJobsWithIDs(11) })
			h.check(2*time.Minute+10*time.Second, "no read yet: the idle runners (idle since 1m21s) have not waited a minute", func(st PoolStatus) bool {
				return st.Reservations == 4 && len(h.jobReadsSoFar()) == 0
			})
			h.check(2*time.Minute+40*time.Second, "jobs 12 and 13 read and released; 14, still queued, kept", func(st PoolStatus) bool {
				reads := h.jobReadsSoFar()
				return st.Reservations == 2 && len(reads) == 1 && slices.Equal(reads[0], []int64{12, 13, 14})
			})
			h.check(4*time.Minute, "no second read within the interval", func(st PoolStatus) bool {
				return len(h.jobReadsSoFar()) == 1
			})
			h.check(5*time.Minute, "job 14 read again after the interval, still kept", func(st PoolStatus) bool {
				reads := h.jobReadsSoFar()
				return st.Reservations == 2 && len(reads) == 2 && slices.Equal(reads[1], []int64{14})
			})
			h.run(spec, 6*time.Minute)
		})
	}
}

func (h *poolHarness) jobReadsSoFar() [][]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.jobReads)
}
