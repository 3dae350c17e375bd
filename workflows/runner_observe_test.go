package workflows

import (
	"testing"
	"time"
)

var rnT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRunnerObservationsNext(t *testing.T) {
	eph := watchLimits{registrationTimeout: 10 * time.Minute, ephemeral: true}
	persistent := watchLimits{registrationTimeout: 10 * time.Minute}
	watched := watchLimits{registrationTimeout: 10 * time.Minute, ephemeral: true, endWithJob: true, poolWatches: true}
	base := RunnerObservations{AttemptStart: rnT0, LastPodCheck: rnT0}
	with := func(f func(o *RunnerObservations)) RunnerObservations {
		o := base
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name   string
		obs    RunnerObservations
		lim    watchLimits
		now    time.Time
		action action
		until  time.Time
		reason string
		ghDone bool
	}{
		{name: "registering waits for the timeout", obs: base, lim: eph, now: rnT0.Add(time.Minute),
			action: actWait, until: rnT0.Add(10 * time.Minute)},
		{name: "registration timeout", obs: base, lim: eph, now: rnT0.Add(10 * time.Minute), action: actCheckRegistration},
		{name: "online waits for the pod check", obs: with(func(o *RunnerObservations) { o.Online = true }), lim: eph,
			now: rnT0.Add(time.Minute), action: actWait, until: rnT0.Add(PodCheckInterval)},
		{name: "pod check due", obs: with(func(o *RunnerObservations) { o.Online = true }), lim: eph,
			now: rnT0.Add(PodCheckInterval), action: actCheckPod},
		{name: "ephemeral pod succeeded needs no unregister", obs: with(func(o *RunnerObservations) { o.PodPhase = PodSucceeded }),
			lim: eph, now: rnT0, action: actEnd, reason: "pod succeeded", ghDone: true},
		{name: "persistent pod succeeded is unregistered", obs: with(func(o *RunnerObservations) { o.PodPhase = PodSucceeded }),
			lim: persistent, now: rnT0, action: actEnd, reason: "pod succeeded"},
		{name: "evicted", obs: with(func(o *RunnerObservations) { o.PodPhase, o.PodReason = PodFailed, "Evicted" }),
			lim: eph, now: rnT0, action: actEnd, reason: "pod failed: Evicted"},
		{name: "pod being deleted", obs: with(func(o *RunnerObservations) { o.PodDeleting = true }),
			lim: eph, now: rnT0, action: actEnd, reason: "pod is being deleted"},
		{name: "drain while idle ends", obs: with(func(o *RunnerObservations) { o.Online, o.Drain = true, &DrainRequest{Reason: "x"} }),
			lim: eph, now: rnT0, action: actEnd, reason: "drained: x"},
		{name: "drain while busy waits", obs: with(func(o *RunnerObservations) {
			o.Online, o.Busy, o.Drain = true, true, &DrainRequest{}
		}), lim: eph, now: rnT0.Add(time.Minute), action: actWait, until: rnT0.Add(PodCheckInterval)},
		{name: "drain before online ends at once", obs: with(func(o *RunnerObservations) { o.Drain = &DrainRequest{} }),
			lim: eph, now: rnT0, action: actEnd, reason: "drained"},
		{name: "offline grace pending", obs: with(func(o *RunnerObservations) { o.Online, o.OfflineSince = true, rnT0 }),
			lim: eph, now: rnT0.Add(time.Minute), action: actWait, until: rnT0.Add(StuckOfflineGrace)},
		{name: "stuck offline", obs: with(func(o *RunnerObservations) { o.Online, o.OfflineSince = true, rnT0 }),
			lim: eph, now: rnT0.Add(StuckOfflineGrace), action: actEnd, reason: "runner offline for 5m0s while its pod runs"},
		{name: "an ephemeral runner that ends with its job ends on its completed notice", obs: with(func(o *RunnerObservations) { o.Online, o.JobDoneAt = true, rnT0 }),
			lim: watchLimits{registrationTimeout: eph.registrationTimeout, ephemeral: true, endWithJob: true}, now: rnT0,
			action: actEnd, reason: "job completed", ghDone: true},
		{name: "a runner still busy with a later job does not end with the earlier one", obs: with(func(o *RunnerObservations) { o.Online, o.JobDoneAt, o.Busy = true, rnT0, true }),
			lim: watchLimits{registrationTimeout: eph.registrationTimeout, ephemeral: true, endWithJob: true}, now: rnT0.Add(time.Minute),
			action: actWait, until: rnT0.Add(EphemeralExitGrace)},
		{name: "ephemeral exit grace", obs: with(func(o *RunnerObservations) { o.Online, o.JobDoneAt = true, rnT0 }),
			lim: eph, now: rnT0.Add(EphemeralExitGrace), action: actEnd, reason: "job completed; pod did not exit by itself", ghDone: true},
		{name: "a runner its pool watches waits for signals alone while it registers", obs: base, lim: watched,
			now: rnT0.Add(time.Hour), action: actWait},
		{name: "a runner its pool watches waits for signals alone while it runs a job", obs: with(func(o *RunnerObservations) { o.Online, o.Busy = true, true }),
			lim: watched, now: rnT0.Add(time.Hour), action: actWait},
		{name: "asked by its pool before its own timeout, a runner waits out the rest", obs: with(func(o *RunnerObservations) { o.CheckAsked = true }),
			lim: watched, now: rnT0.Add(time.Minute), action: actWait, until: rnT0.Add(10 * time.Minute)},
		{name: "asked by its pool after its own timeout, a runner checks its registration", obs: with(func(o *RunnerObservations) { o.CheckAsked = true }),
			lim: watched, now: rnT0.Add(10 * time.Minute), action: actCheckRegistration},
		{name: "a watched runner whose check could not read asks again when due", obs: with(func(o *RunnerObservations) { o.RecheckAt = rnT0.Add(11 * time.Minute) }),
			lim: watched, now: rnT0.Add(10 * time.Minute), action: actWait, until: rnT0.Add(11 * time.Minute)},
		{name: "a watched runner still keeps its offline grace", obs: with(func(o *RunnerObservations) { o.Online, o.OfflineSince = true, rnT0 }),
			lim: watched, now: rnT0.Add(time.Minute), action: actWait, until: rnT0.Add(StuckOfflineGrace)},
		{name: "gone after online", obs: with(func(o *RunnerObservations) { o.Online, o.Gone = true, true }),
			lim: eph, now: rnT0, action: actEnd, reason: "runner no longer registered at GitHub", ghDone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs
			st := obs.next(tc.now, tc.lim)
			if st.action != tc.action || !st.until.Equal(tc.until) || st.end.reason != tc.reason || st.end.githubDone != tc.ghDone {
				t.Errorf("next = %+v, want action %d until %v reason %q githubDone %v", st, tc.action, tc.until, tc.reason, tc.ghDone)
			}
		})
	}
}

func TestRunnerObservationsRecord(t *testing.T) {
	t.Run("pod phases never go backwards and other pods are ignored", func(t *testing.T) {
		var o RunnerObservations
		o.recordPod(PodStatusSignal{UID: "a", Phase: PodRunning}, "", rnT0)
		if o.PodPhase != "" {
			t.Fatalf("recorded a pod signal before a pod exists: %+v", o)
		}
		o.recordPod(PodStatusSignal{UID: "a", Phase: PodSucceeded}, "a", rnT0)
		o.recordPod(PodStatusSignal{UID: "a", Phase: PodRunning}, "a", rnT0)
		o.recordPod(PodStatusSignal{UID: "b", Phase: PodGone}, "a", rnT0)
		if o.PodPhase != PodSucceeded {
			t.Errorf("phase = %s, want Succeeded", o.PodPhase)
		}
	})
	t.Run("gone before online is a stale listing", func(t *testing.T) {
		var o RunnerObservations
		o.recordRunnerStatus(RunnerStatusSignal{Gone: true}, rnT0, false)
		if o.Gone {
			t.Error("a listing without the runner ended a runner never seen online")
		}
	})
	t.Run("offline after the ephemeral job is expected", func(t *testing.T) {
		var o RunnerObservations
		o.recordJobStarted(JobSignal{JobID: 1})
		o.recordJobCompleted(JobSignal{JobID: 1}, true, rnT0)
		o.recordRunnerStatus(RunnerStatusSignal{}, rnT0, false)
		if !o.OfflineSince.IsZero() {
			t.Error("an ephemeral runner going offline after its job was treated as stuck")
		}
	})
	t.Run("late job start after completion is ignored", func(t *testing.T) {
		var o RunnerObservations
		o.recordJobCompleted(JobSignal{JobID: 5}, false, rnT0)
		o.recordJobStarted(JobSignal{JobID: 5})
		o.recordJobCompleted(JobSignal{JobID: 5}, false, rnT0)
		if o.Busy || o.JobsRun != 1 {
			t.Errorf("busy=%v jobsRun=%d, want idle after one job", o.Busy, o.JobsRun)
		}
	})
	t.Run("recent jobs stay bounded", func(t *testing.T) {
		var o RunnerObservations
		for i := int64(1); i <= 3*RecentJobsKept; i++ {
			o.recordJobCompleted(JobSignal{JobID: i}, false, rnT0)
		}
		if len(o.RecentJobs) != RecentJobsKept || o.JobsRun != 3*RecentJobsKept {
			t.Errorf("kept %d job ids for %d jobs", len(o.RecentJobs), o.JobsRun)
		}
	})
}
