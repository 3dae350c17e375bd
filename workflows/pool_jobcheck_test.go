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
	stale := jobCheckRules{staleRenewals: ReservationRenewalsBeforeCheck}
	renewedTimes := func(s ReservationState, job int64, n int) ReservationState {
		for i := range s.Reservations {
			if s.Reservations[i].JobID == job {
				s.Reservations[i].Renewals = n
			}
		}
		return s
	}
	many := make([]int64, ReservedJobCheckMax+5)
	for i := range many {
		many[i] = int64(100 + i)
	}
	tests := []struct {
		name     string
		runners  []PoolRunner
		reserved ReservationState
		last     time.Time
		ends     []time.Time
		rules    jobCheckRules
		want     jobCheck
	}{{
		name:     "no idle runner: every reservation may still be on its way to one",
		runners:  []PoolRunner{busy("a", 1), {Name: "b", State: RunnerRegistering, Since: t0}},
		reserved: reserved(1, 2),
	}, {
		name:     "an idle runner and a reservation no runner serves: due ReservedJobCheckAfter after the runner went idle",
		runners:  []PoolRunner{busy("a", 1), idle("b", 10*time.Second), idle("c", 5*time.Second)},
		reserved: reserved(1, 2, 3),
		want:     jobCheck{due: t0.Add(5*time.Second + ReservedJobCheckAfter), jobs: refs(2, 3), whole: true},
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
		last:     t0.Add(10 * time.Minute),
		want:     jobCheck{due: t0.Add(10*time.Minute + ReservedJobCheckInterval), jobs: refs(2), whole: true},
	}, {
		name:     "a runner ended after a job nobody named: due ReservedJobCheckSettle after the first such end, no idle runner needed",
		runners:  []PoolRunner{{Name: "b", State: RunnerRegistering, Since: t0}},
		reserved: reserved(2, 3),
		ends:     []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)},
		want:     jobCheck{due: t0.Add(time.Second + ReservedJobCheckSettle), jobs: refs(2, 3), whole: true},
	}, {
		name:     "ends and an idle runner: the earlier of the two",
		runners:  []PoolRunner{idle("b", -time.Hour)},
		reserved: reserved(2),
		ends:     []time.Time{t0},
		want:     jobCheck{due: t0.Add(-time.Hour + ReservedJobCheckAfter), jobs: refs(2), whole: true},
	}, {
		name:     "ends: not before ReservedJobCheckSpacing after the last check",
		reserved: reserved(2),
		last:     t0,
		ends:     []time.Time{t0.Add(time.Second)},
		want:     jobCheck{due: t0.Add(ReservedJobCheckSpacing), jobs: refs(2), whole: true},
	}, {
		name:     "ends but every reservation served: nothing to read",
		runners:  []PoolRunner{busy("a", 1)},
		reserved: reserved(1),
		ends:     []time.Time{t0},
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
		name:     "no runner online, a reservation renewed ReservationRenewalsBeforeCheck times: due at once",
		runners:  []PoolRunner{{Name: "b", State: RunnerRegistering, Since: t0}},
		reserved: renewedTimes(reserved(2, 3), 3, ReservationRenewalsBeforeCheck),
		rules:    stale,
		want:     jobCheck{due: time.Time{}.Add(StaleReservationCheckInterval), jobs: refs(2, 3), whole: true},
	}, {
		name:     "renewed reservations: not before StaleReservationCheckInterval after the last check",
		reserved: renewedTimes(reserved(2), 2, ReservationRenewalsBeforeCheck+1),
		last:     t0,
		rules:    stale,
		want:     jobCheck{due: t0.Add(StaleReservationCheckInterval), jobs: refs(2), whole: true},
	}, {
		name:     "renewed fewer times: no check",
		reserved: renewedTimes(reserved(2), 2, ReservationRenewalsBeforeCheck-1),
		rules:    stale,
	}, {
		name:     "renewed often enough, but without the rule (histories before it): no check",
		reserved: renewedTimes(reserved(2), 2, ReservationRenewalsBeforeCheck),
	}, {
		name:     "a renewed reservation a runner serves is not suspect",
		runners:  []PoolRunner{busy("a", 2)},
		reserved: renewedTimes(reserved(2), 2, ReservationRenewalsBeforeCheck),
		rules:    stale,
	}, {
		name:     "an end past its hold still prompts a check under the first rule",
		reserved: reserved(2),
		ends:     []time.Time{t0.Add(-UnattributedEndHold)},
		want:     jobCheck{due: t0.Add(-UnattributedEndHold + ReservedJobCheckSettle), jobs: refs(2), whole: true},
	}, {
		name:     "held ends only: an end past its hold prompts nothing",
		reserved: reserved(2),
		ends:     []time.Time{t0.Add(-UnattributedEndHold)},
		rules:    jobCheckRules{heldEndsOnly: true},
	}, {
		name:     "held ends only: the first end still held makes the check due",
		reserved: reserved(2),
		ends:     []time.Time{t0.Add(-UnattributedEndHold), t0.Add(-time.Minute)},
		rules:    jobCheckRules{heldEndsOnly: true},
		want:     jobCheck{due: t0.Add(-time.Minute + ReservedJobCheckSettle), jobs: refs(2), whole: true},
	}, {
		name:     "at most ReservedJobCheckMax, the oldest jobs first",
		runners:  []PoolRunner{idle("b", 0)},
		reserved: reserved(many...),
		want:     jobCheck{due: t0.Add(ReservedJobCheckAfter), jobs: refs(many[:ReservedJobCheckMax]...)},
	}}
	for _, tt := range tests {
		got := planJobCheck(PoolState{Runners: tt.runners, Reserved: tt.reserved, LastJobCheck: tt.last, UnattributedEnds: tt.ends}, t0, tt.rules)
		if !got.due.Equal(tt.want.due) || !slices.Equal(got.jobs, tt.want.jobs) || got.whole != tt.want.whole {
			t.Errorf("%s: planJobCheck = %v %v whole=%v, want %v %v whole=%v", tt.name, got.due, got.jobs, got.whole, tt.want.due, tt.want.jobs, tt.want.whole)
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

func TestUnattributedEnd(t *testing.T) {
	done := RunnerStateReport{Runner: "r", State: RunnerDone, Reason: EndReasonPodSucceeded}
	withJob := func(rep RunnerStateReport) RunnerStateReport { rep.EndedJob = 7; return rep }
	failed := done
	failed.State, failed.Reason = RunnerFailed, NeverOnlineReason
	drained := done
	drained.Reason = "drained"
	for _, tt := range []struct {
		name      string
		runner    PoolRunner
		rep       RunnerStateReport
		ephemeral bool
		want      bool
	}{
		{"an ephemeral runner's pod succeeded, its job unknown", PoolRunner{Name: "r"}, done, true, true},
		{"the pool knew its job", PoolRunner{Name: "r", JobID: 7}, done, true, false},
		{"the runner named its job", PoolRunner{Name: "r"}, withJob(done), true, false},
		{"a persistent runner's pod ending says nothing of a job", PoolRunner{Name: "r"}, done, false, false},
		{"a runner that never came online ran nothing", PoolRunner{Name: "r"}, failed, true, false},
		{"a drained runner ran nothing", PoolRunner{Name: "r"}, drained, true, false},
	} {
		if got := unattributedEnd(tt.runner, tt.rep, tt.ephemeral); got != tt.want {
			t.Errorf("%s: unattributedEnd = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestHeldUnattributed(t *testing.T) {
	ends := []time.Time{t0.Add(-UnattributedEndHold), t0.Add(-time.Second), t0}
	if got := heldUnattributed(ends, t0); got != 2 {
		t.Errorf("heldUnattributed = %d, want 2 (the one UnattributedEndHold old no longer holds)", got)
	}
}

// Runners whose in_progress and completed events were lost end with their pods (pod
// succeeded) and name no job: each counts for one reservation that is over, so the pool starts
// no runner for it, and a check of the reserved jobs at GitHub a few seconds later finds which
// jobs are done and ends their reservations. A job still queued keeps its reservation and its
// runner. Across continue-as-new.
func TestPoolStartsNoRunnerForJobsThatRanUnnamed(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			h.jobsAtGitHub = map[int64]JobReading{
				11: {ID: 11, Status: JobCompleted, Conclusion: "success"},
				12: {ID: 12, Status: JobCompleted, Conclusion: "success"},
			}
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			batch := reserve(JobQueued, 11, 12, 13)
			for i := range batch.Events {
				batch.Events[i].Repository = "acme/app"
			}
			first, second := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2)
			h.at(time.Minute, func() { h.signal(SignalReservations, batch) })
			h.at(2*time.Minute, func() {
				h.end(first, RunnerDone, EndReasonPodSucceeded)
				h.end(second, RunnerDone, EndReasonPodSucceeded)
			})
			h.check(2*time.Minute+2*time.Second, "no runner started for the two jobs that ran", func(st PoolStatus) bool {
				return len(st.Runners) == 1 && st.Totals.Started == 3 && st.Desired == 1
			})
			h.check(2*time.Minute+30*time.Second, "the check read the jobs no runner serves and ended the two done", func(st PoolStatus) bool {
				reads := h.jobReadsSoFar()
				return len(reads) == 1 && slices.Equal(reads[0], []int64{11, 12, 13}) &&
					st.Reservations == 1 && len(st.Reserved) == 1 && st.Reserved[0].JobID == 13 &&
					len(st.Runners) == 1 && st.Totals.Started == 3
			})
			h.run(spec, 4*time.Minute)
		})
	}
}

// A pool whose runners never come online (a quota never raised, say) holds a reservation
// whose job's completion was lost. Once the reservation has been renewed
// ReservationRenewalsBeforeCheck times, the pool reads the job at GitHub with no idle runner
// and ends the reservation; its runner goes. A job GitHub still has queued keeps its
// reservation, read again no sooner than StaleReservationCheckInterval. Across continue-as-new.
func TestPoolReadsJobsWhoseRunnersNeverComeOnline(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			h.jobsAtGitHub = map[int64]JobReading{11: {ID: 11, Status: JobCompleted, Conclusion: "success"}}
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			d := spec.ReservationDurationOrDefault()
			for seq := range int64(4) {
				h.silence(RunnerName("linux", Generation(""), seq+1))
			}
			batch := reserve(JobQueued, 11, 12)
			for i := range batch.Events {
				batch.Events[i].Repository = "acme/app"
			}
			h.at(time.Minute, func() { h.signal(SignalReservations, batch) })
			renewedTwice := time.Minute + time.Duration(ReservationRenewalsBeforeCheck)*d
			h.check(renewedTwice-time.Minute, "renewed once: not read yet", func(st PoolStatus) bool {
				return st.Reservations == 2 && len(h.jobReadsSoFar()) == 0
			})
			h.check(renewedTwice+30*time.Second, "renewed twice: both read, the completed one released, the queued one kept", func(st PoolStatus) bool {
				reads := h.jobReadsSoFar()
				return len(reads) == 1 && slices.Equal(reads[0], []int64{11, 12}) &&
					st.Reservations == 1 && st.Reserved[0].JobID == 12 && st.Desired == 1
			})
			h.check(renewedTwice+StaleReservationCheckInterval-time.Minute, "not read again within the interval", func(st PoolStatus) bool {
				return len(h.jobReadsSoFar()) == 1
			})
			h.check(renewedTwice+StaleReservationCheckInterval+30*time.Second, "the queued job read again, still kept", func(st PoolStatus) bool {
				reads := h.jobReadsSoFar()
				return len(reads) == 2 && slices.Equal(reads[1], []int64{12}) && st.Reservations == 1
			})
			h.run(spec, renewedTwice+StaleReservationCheckInterval+time.Minute)
		})
	}
}

func TestEndsAccountedFor(t *testing.T) {
	refs := []JobRef{{ID: 1, Repository: "acme/app"}, {ID: 2, Repository: "acme/app"}, {ID: 3, Repository: "acme/app"}}
	done := func(id int64) JobReading { return JobReading{ID: id, Status: JobCompleted, Conclusion: "success"} }
	queuedJob := func(id int64) JobReading { return JobReading{ID: id, Status: JobQueued} }
	for _, tt := range []struct {
		name   string
		plan   jobCheck
		read   ReadJobsOutput
		before int
		want   int
	}{
		{"every suspect job read: every end accounted for", jobCheck{jobs: refs, whole: true},
			ReadJobsOutput{Jobs: []JobReading{done(1), queuedJob(2), queuedJob(3)}}, 3, 3},
		{"a job unread: only as many ends as jobs found over", jobCheck{jobs: refs, whole: true},
			ReadJobsOutput{Jobs: []JobReading{done(1), queuedJob(3)}, Unread: []int64{2}}, 2, 1},
		{"a job GitHub does not know is over too", jobCheck{jobs: refs, whole: true},
			ReadJobsOutput{Jobs: []JobReading{{ID: 1, Gone: true}}}, 2, 1},
		{"reservations left out of the check: only as many as found over", jobCheck{jobs: refs},
			ReadJobsOutput{Jobs: []JobReading{done(1), done(2), queuedJob(3)}}, 3, 2},
		{"never more than the ends", jobCheck{jobs: refs},
			ReadJobsOutput{Jobs: []JobReading{done(1), done(2), done(3)}}, 1, 1},
		{"nothing over, a job unread: none", jobCheck{jobs: refs, whole: true},
			ReadJobsOutput{Jobs: []JobReading{queuedJob(1), {ID: 2, Status: JobInProgress, RunnerName: "other-abcd-1"}}}, 2, 0},
	} {
		if got := endsAccountedFor(tt.plan, tt.read, tt.before); got != tt.want {
			t.Errorf("%s: endsAccountedFor = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestLiftEnds(t *testing.T) {
	ends := []time.Time{t0.Add(-2 * time.Second), t0.Add(-time.Second), t0, t0.Add(time.Second)}
	for _, tt := range []struct {
		n    int
		want []time.Time
	}{
		{0, ends},
		{1, ends[1:]},
		{3, ends[3:]},
		{9, ends[3:]}, // an end after the check began is never lifted by it
	} {
		if got := liftEnds(ends, t0, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("liftEnds(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// Two runners end after jobs nobody named (their pods succeeded): they ran jobs 11 and 12.
// The check reads 11 (completed) and 13 (queued) but cannot read 12. It accounts for one end
// (the job it found over), not both: the other holds on, so the pool starts no runner for job
// 12, which has already run, until UnattributedEndHold bounds the wait. An end past its hold
// prompts no more reads. Across continue-as-new.
func TestPoolLiftsUnattributedEndsOnlyForJobsItRead(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			h.jobsAtGitHub = map[int64]JobReading{11: {ID: 11, Status: JobCompleted, Conclusion: "success"}}
			h.jobsUnread = map[int64]bool{12: true}
			spec := poolTestSpec()
			spec.MinReplicas, spec.MaxReplicas = 0, ptr(5)
			batch := reserve(JobQueued, 11, 12, 13)
			for i := range batch.Events {
				batch.Events[i].Repository = "acme/app"
			}
			first, second := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2)
			h.at(time.Minute, func() { h.signal(SignalReservations, batch) })
			h.at(2*time.Minute, func() {
				h.end(first, RunnerDone, EndReasonPodSucceeded)
				h.end(second, RunnerDone, EndReasonPodSucceeded)
			})
			h.check(2*time.Minute+30*time.Second, "11 released; the end for 12 still held: no runner started for it", func(st PoolStatus) bool {
				reads := h.jobReadsSoFar()
				return len(reads) >= 1 && slices.Equal(reads[0], []int64{11, 12, 13}) &&
					st.Reservations == 2 && len(st.Runners) == 1 && st.Totals.Started == 3 && st.Desired == 1
			})
			var readsAtHold int
			h.at(2*time.Minute+UnattributedEndHold+time.Second, func() { readsAtHold = len(h.jobReadsSoFar()) })
			h.check(2*time.Minute+UnattributedEndHold+time.Minute, "the hold over: a runner for the reservations left", func(st PoolStatus) bool {
				return st.Totals.Started == 4 && st.Desired == 2
			})
			// Before the new runner has stood idle a minute (its own reason to read).
			h.check(2*time.Minute+UnattributedEndHold+75*time.Second, "the end past its hold prompts no read", func(PoolStatus) bool {
				return len(h.jobReadsSoFar()) == readsAtHold
			})
			h.run(spec, 2*time.Minute+UnattributedEndHold+2*time.Minute)
		})
	}
}

func TestEndsNamedByEvents(t *testing.T) {
	gone, other := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2)
	staying := RunnerName("linux", Generation(""), 3)
	held := ReservationState{Reservations: []Reservation{{JobID: 11, ExpiresAt: t0.Add(time.Minute)},
		{JobID: 12, ExpiresAt: t0.Add(time.Minute)}, {JobID: 13, ExpiresAt: t0}}}
	st := PoolState{Spec: PoolSpec{Name: "linux"}, Reserved: held, Runners: []PoolRunner{{Name: staying}},
		Finished: []FinishedRunner{{Name: gone, State: RunnerDone, Reason: EndReasonPodSucceeded}, {Name: other, State: RunnerFailed, Reason: "pod failed"}}}
	event := func(action string, job int64, runner string) WorkflowJobEvent {
		return WorkflowJobEvent{Action: action, JobID: job, RunnerName: runner}
	}
	for _, tt := range []struct {
		name   string
		events []WorkflowJobEvent
		want   int
	}{
		{"completed, naming a runner that ended after its pod succeeded", []WorkflowJobEvent{event(JobCompleted, 11, gone)}, 1},
		{"in_progress does too", []WorkflowJobEvent{event(JobInProgress, 11, gone)}, 1},
		{"one job counted once", []WorkflowJobEvent{event(JobInProgress, 11, gone), event(JobCompleted, 11, gone)}, 1},
		{"a runner aged out of the finished list counts", []WorkflowJobEvent{event(JobCompleted, 12, RunnerName("linux", Generation(""), 9))}, 1},
		{"a runner still in the pool: not ended", []WorkflowJobEvent{event(JobCompleted, 11, staying)}, 0},
		{"a runner that failed made no unattributed end", []WorkflowJobEvent{event(JobCompleted, 11, other)}, 0},
		{"a reservation already over", []WorkflowJobEvent{event(JobCompleted, 13, gone), event(JobCompleted, 14, gone)}, 0},
		{"another pool's runner", []WorkflowJobEvent{event(JobCompleted, 11, RunnerName("other", Generation(""), 1))}, 0},
		{"no runner named", []WorkflowJobEvent{event(JobCompleted, 11, "")}, 0},
		{"queued names nothing over", []WorkflowJobEvent{event(JobQueued, 11, gone)}, 0},
	} {
		if got := endsNamedByEvents(st, ReservationBatch{Events: tt.events}, t0); got != tt.want {
			t.Errorf("%s: endsNamedByEvents = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestLiftHeldEnds(t *testing.T) {
	past := t0.Add(-UnattributedEndHold)
	ends := []time.Time{past, t0.Add(-time.Minute), t0.Add(-time.Second), t0}
	for _, tt := range []struct {
		n    int
		want []time.Time
	}{
		{0, ends},
		{1, []time.Time{past, t0.Add(-time.Second), t0}}, // the oldest that still holds
		{3, []time.Time{past}},
		{9, []time.Time{past}}, // an end past its hold is never lifted: it counts for nothing
	} {
		if got := liftHeldEnds(ends, t0, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("liftHeldEnds(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}
