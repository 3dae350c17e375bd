package githubdouble

import (
	"slices"
	"time"
)

// Reassignment: a job assigned to a set that no runner of the set takes in time comes back. The
// set's listener hears JobCompleted with result "canceled" and, the job being queued again,
// JobAssigned (or JobAvailable, in a set offered its jobs) for the same runner request, up to
// three times (the client README, "Job Reassignment"). After the last the service gives up and
// cancels the job ("not acquired by Runner ... even after multiple attempts", actions/runner
// #4728). Config.ScaleSetReassignAfter turns it on; each assignment lasts that long.

const (
	// DefaultScaleSetReassignAfter is how long an assignment lasts on the service, to turn
	// reassignment on with: GitHub's trace of one job in actions/actions-runner-controller #4602
	// shows its assignments five minutes apart. The README speaks of incremental delays; the one
	// public trace shows equal ones, which the double follows.
	DefaultScaleSetReassignAfter = 5 * time.Minute
	// ScaleSetMaxReassignments is how many times a job is assigned again before the service
	// cancels it (the client README, "Job Reassignment").
	ScaleSetMaxReassignments = 3
)

// assign marks a job its set now holds for a runner, from at, and makes sure its assignment is
// looked at when it lapses. Callers hold s.mu.
func (s *Server) assign(j *job, at time.Time) {
	j.assignedAt = at
	if s.cfg.ScaleSetReassignAfter > 0 {
		s.armLapse(at.Add(s.cfg.ScaleSetReassignAfter))
	}
}

// lapseAssignments takes back every assignment that lapsed by now, in order, as often as it
// lapsed: an assignment made again at a lapse lasts from then, so a double nobody asked for a
// while catches up as the service would have. It runs when the lapse timer fires and before a
// listener or runner looks, so a test's clock (Config.Now) needs no timer. Callers hold s.mu.
func (s *Server) lapseAssignments() {
	after := s.cfg.ScaleSetReassignAfter
	if after == 0 {
		return
	}
	now := s.now()
	var next time.Time
	for _, id := range slices.Clone(s.st.queued) {
		j := s.st.jobs[id]
		for s.holds(j) && !now.Before(j.assignedAt.Add(after)) {
			s.takeBack(j, j.assignedAt.Add(after))
		}
		if due := j.assignedAt.Add(after); s.holds(j) && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	if !next.IsZero() {
		s.armLapse(next)
	}
}

// holds reports whether a set holds the queued job for its runners, waiting to be taken.
func (s *Server) holds(j *job) bool {
	return j.Status == StatusQueued && j.scaleSetID != 0 && !j.offered && !j.assignedAt.IsZero()
}

// takeBack ends the job's assignment, lapsed at at: the set's listener hears it cancelled and
// the job is routed again, or, assigned as often as the service does, cancelled. Callers hold
// s.mu.
func (s *Server) takeBack(j *job, at time.Time) {
	ss := s.st.scaleSets[j.scaleSetID]
	if j.Reassigned >= ScaleSetMaxReassignments {
		s.log.Debug("scale-set job not taken after its reassignments; cancelled", "jobID", j.ID)
		s.completeJob(j, ConclusionCancelled)
		return
	}
	m := s.jobMessage(jobCompleted, j, nil)
	m.Result, m.FinishTime = serviceResults[ConclusionCancelled], at.UTC()
	s.pushMessage(ss, m)
	delete(ss.jobs, j.ID)
	j.scaleSetID, j.assignedAt = 0, time.Time{}
	j.Reassigned++
	s.log.Debug("scale-set job taken back", "jobID", j.ID, "scaleSet", ss.name, "reassigned", j.Reassigned)
	s.routeToScaleSet(j)
	if j.scaleSetID != 0 && !j.offered {
		s.assign(j, at)
	}
}

// armLapse makes sure the lapse timer fires by at. Callers hold s.mu.
func (s *Server) armLapse(at time.Time) {
	if s.lapse != nil && !s.lapseAt.After(at) {
		return
	}
	if s.lapse != nil {
		s.lapse.Stop()
	}
	s.lapseAt = at
	s.lapse = time.AfterFunc(max(at.Sub(s.now()), 0), s.onLapse)
}

// onLapse runs when the lapse timer fires.
func (s *Server) onLapse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapse = nil
	select {
	case <-s.done:
		return
	default:
	}
	s.lapseAssignments()
}

// SetScaleSetReassignAfter changes Config.ScaleSetReassignAfter of a running double (0 turns
// reassignment off); assignments made before count from when they were made.
func (s *Server) SetScaleSetReassignAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.ScaleSetReassignAfter = max(d, 0)
	s.lapseAssignments()
}
