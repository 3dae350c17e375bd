package main

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The soak's faults of the Actions service and the worker that the scale-set pools meet:
// sessions expired, jobs reassigned, a rolling deploy.

const (
	// sessionsBackBound bounds the wait for every scale set to have a new session after a
	// session expiry or a rolling deploy. A longer wait is said, not failed: the jobs' counts
	// show whether it cost anything.
	sessionsBackBound = 3 * time.Minute
	// reassignLapse is how long an assignment lasts at the service during a reassignment
	// window (GitHub's lasts minutes). Four lapses are longer than the longest window, so a job
	// assigned in the window is taken back at most three times before it closes, never
	// cancelled.
	reassignLapse = 10 * time.Second
	// reassignHold is how long the scale-set pools are paused at the window's start, so the
	// jobs assigned meanwhile wait past a lapse: the service takes them back while no runner
	// comes, as it does when runners are slow to start.
	reassignHold = 15 * time.Second
	// reassignCalmBound bounds the wait, before the window opens, for the scale-set jobs
	// already waiting to be young enough that none is cancelled in the window.
	reassignCalmBound = 3 * time.Minute
)

// expireSessions has the Actions service end every scale set's message session, as it ends
// one whose holder it takes for gone: the double's session lifetime is a nanosecond while it
// looks at the sets, then its default again. Each listener's next poll finds its session
// gone (401, then 404 on the refresh) and opens another; the fault lasts until every set has
// a new session. It waits first until no set's session is one a killed or stopped worker
// left, so the sessions it ends are held by a live worker.
func (s *soakPhase) expireSessions(ctx context.Context, rec *SoakFault) error {
	if _, err := s.waitNewSessions(ctx, s.workerSessions); err != nil {
		return err
	}
	gh := s.e.world.GitHub
	start := time.Now()
	before := s.sessions()
	gh.SetScaleSetSessionTimeout(time.Nanosecond)
	err := pollEvery(ctx, time.Millisecond, "the scale sets' sessions ended", func() (bool, error) {
		return !s.sessionKept(before), nil
	})
	gh.SetScaleSetSessionTimeout(0)
	if err != nil {
		return err
	}
	return s.servedAgain(ctx, before, start, rec)
}

// rollingDeploy starts a second worker process and, once it polls, stops the first (SIGTERM),
// which closes the sessions it holds as it stops; the listeners open theirs on the second.
// It waits first until no set's session is one a killed worker left (a session the service
// still keeps refuses the next one for minutes, whatever the deploy does). It measures when
// every set has a new session, from the SIGTERM, and how soon the scale-set jobs queued
// during the deploy (from the second worker's start until the first has exited and every set
// has a new session) started. The fault lasts until then and those jobs started.
func (s *soakPhase) rollingDeploy(ctx context.Context, rec *SoakFault) error {
	if _, err := s.waitNewSessions(ctx, s.workerSessions); err != nil {
		return err
	}
	began := time.Now()
	old, before := s.worker, s.leavingWorker()
	if err := s.startWorker(ctx); err != nil {
		return err
	}
	term := time.Now()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if old != nil && !old.stop() {
			s.ungracefulStops++
			s.e.say("soak: the first worker did not stop within %s of its SIGTERM and was killed (log %s)", workerStopGrace, old.logPath)
		}
	}()
	served := s.servedAgain(ctx, before, term, rec)
	<-gone
	if served != nil {
		return served
	}
	return s.queuedDuring(ctx, began, time.Now(), rec)
}

// queuedDuring waits, at most sessionsBackBound, until the scale-set jobs queued between from
// and to have started, and notes in rec how many there were and how long after its queueing
// each started (the median and the longest; one not started within the bound counts as the
// bound).
func (s *soakPhase) queuedDuring(ctx context.Context, from, to time.Time, rec *SoakFault) error {
	gh := s.e.world.GitHub
	var waits []time.Duration
	wait, cancel := context.WithTimeout(ctx, sessionsBackBound)
	defer cancel()
	err := pollEvery(wait, 500*time.Millisecond, "the jobs queued during the deploy to start", func() (bool, error) {
		waits = waits[:0]
		started := true
		for _, id := range s.setJobIDs() {
			j, _ := gh.Job(id)
			if j.CreatedAt.Before(from) || j.CreatedAt.After(to) {
				continue
			}
			if j.StartedAt.IsZero() {
				started = false
				waits = append(waits, time.Since(j.CreatedAt))
				continue
			}
			waits = append(waits, j.StartedAt.Sub(j.CreatedAt))
		}
		return started, nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		s.e.say("soak: a job queued during the deploy had not started within %s", sessionsBackBound)
	}
	rec.QueuedDuring = len(waits)
	if len(waits) > 0 {
		slices.Sort(waits)
		rec.QueuedDuringStartedP50Seconds = round1(waits[len(waits)/2].Seconds())
		rec.QueuedDuringStartedMaxSeconds = round1(waits[len(waits)-1].Seconds())
	}
	return nil
}

// leavingWorker notes the sessions of a worker about to be killed or stopped, and returns them.
func (s *soakPhase) leavingWorker() map[int64]string {
	s.workerSessions = s.sessions()
	return s.workerSessions
}

// reassign has the Actions service take back, for the window, each job a set holds that no
// runner of the set took within reassignLapse, and assign it again, as GitHub does after
// minutes; the scale-set pools are paused for the window's first reassignHold, so jobs wait
// past a lapse. The window opens once no scale-set job has waited so long that four lapses
// would end inside it: the double catches up at once on assignments older than a lapse.
func (s *soakPhase) reassign(ctx context.Context, window time.Duration, rec *SoakFault) error {
	gh := s.e.world.GitHub
	if err := s.waitSetJobsYounger(ctx, 4*reassignLapse-window); err != nil {
		return err
	}
	before := s.reassignments()
	if err := s.signalScaleSetPools(ctx, workflows.SignalPause); err != nil {
		return err
	}
	gh.SetScaleSetReassignAfter(reassignLapse)
	defer gh.SetScaleSetReassignAfter(0)
	held := sleep(ctx, reassignHold)
	// Resumed however the hold ended: a paused pool starts no runner.
	if err := cmp.Or(s.signalScaleSetPools(context.WithoutCancel(ctx), workflows.SignalResume), held); err != nil {
		return err
	}
	err := sleep(ctx, window-reassignHold)
	rec.LapseSeconds, rec.TakenBack = reassignLapse.Seconds(), s.reassignments()-before
	s.e.say("soak: the service took jobs back %d times in the window", rec.TakenBack)
	return err
}

// signalScaleSetPools sends an operator's pause or resume to the scale-set pools.
func (s *soakPhase) signalScaleSetPools(ctx context.Context, signal string) error {
	for _, p := range soakScaleSetPools {
		req := workflows.OperatorRequest{Reason: "soak: reassignment window"}
		if err := s.e.c.SignalWorkflow(ctx, workflows.PoolWorkflowID(p), "", signal, req); err != nil {
			return err
		}
	}
	return nil
}

// waitSetJobsYounger waits, at most reassignCalmBound, until no queued job of the scale-set
// pools was queued longer than age ago; past the bound it says so and goes on.
func (s *soakPhase) waitSetJobsYounger(ctx context.Context, age time.Duration) error {
	wait, cancel := context.WithTimeout(ctx, reassignCalmBound)
	defer cancel()
	err := pollEvery(wait, time.Second, "the scale-set jobs waiting to be young", func() (bool, error) {
		return s.oldestWaiting() < age, nil
	})
	if err != nil && ctx.Err() == nil {
		s.e.say("soak: a scale-set job has waited %s, longer than %s; reassigning anyway", s.oldestWaiting().Round(time.Second), age)
		return nil
	}
	return err
}

// oldestWaiting is how long the scale-set pools' longest-waiting queued job has waited.
func (s *soakPhase) oldestWaiting() time.Duration {
	var oldest time.Duration
	for _, id := range s.setJobIDs() {
		if j, _ := s.e.world.GitHub.Job(id); j.Status == githubdouble.StatusQueued {
			oldest = max(oldest, time.Since(j.CreatedAt))
		}
	}
	return oldest
}

// reassignments is how many times the service took the scale-set pools' jobs back so far.
func (s *soakPhase) reassignments() int {
	_, times := reassigned(s.e.world.GitHub, s.setJobIDs())
	return times
}

// sessions are the soak's sets' open sessions at the double, by set id ("" for none).
func (s *soakPhase) sessions() map[int64]string {
	out := map[int64]string{}
	for _, id := range s.setIDs {
		out[id] = ""
	}
	for _, set := range s.e.world.GitHub.ScaleSets() {
		if _, ok := out[set.ID]; ok {
			out[set.ID] = set.SessionID
		}
	}
	return out
}

// sessionKept says whether a set still has the session it had before.
func (s *soakPhase) sessionKept(before map[int64]string) bool {
	now := s.sessions()
	for id, old := range before {
		if old != "" && now[id] == old {
			return true
		}
	}
	return false
}

// servedAgain waits until every set has a session other than the one it had before, and
// notes in rec when, from start.
func (s *soakPhase) servedAgain(ctx context.Context, before map[int64]string, start time.Time, rec *SoakFault) error {
	ok, err := s.waitNewSessions(ctx, before)
	if ok {
		rec.ServedAgainSeconds = round1(time.Since(start).Seconds())
	}
	return err
}

// waitNewSessions waits, at most sessionsBackBound, until every set has a session other than
// the one it had in before, and says whether it came to that; past the bound it says so and
// goes on.
func (s *soakPhase) waitNewSessions(ctx context.Context, before map[int64]string) (bool, error) {
	wait, cancel := context.WithTimeout(ctx, sessionsBackBound)
	defer cancel()
	err := pollEvery(wait, 500*time.Millisecond, "every scale set to have a new session", func() (bool, error) {
		now := s.sessions()
		for _, id := range s.setIDs {
			if now[id] == "" || now[id] == before[id] {
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil:
		s.e.say("soak: a scale set had no new session within %s", sessionsBackBound)
		return false, nil
	}
	return true, nil
}
