package githubdouble

import "slices"

// Jobs of scale sets: a queued job whose labels a set carries (and whose repository the set's
// scope covers) is assigned to that set — the oldest such set with room — and from then on goes
// only to an idle runner created from that set's JIT configuration. The set's listener hears of
// it as JobAssigned, JobStarted and JobCompleted messages.
//
// A set has room while its assigned jobs (waiting or running) are fewer than the capacity its
// listener last reported (X-ScaleSetMaxCapacity): the service assigns no more than the set can
// run, so that no backlog builds there (the client README, "Autoscaling"). A job no set has room
// for stays queued until one has. A set whose listener never reported a capacity takes any
// number; the last report outlives the session that sent it.

// statistics counts a set's jobs and runners. Assigned jobs are those waiting for one of its
// runners plus those running. Without job offers a waiting job also counts as available and a
// runner acquires a job as it starts it; in a set offered its jobs, available jobs are the
// offered ones and acquired the assigned ones. Callers hold s.mu.
func (s *Server) statistics(ss *scaleSet) ScaleSetStatistics {
	var st ScaleSetStatistics
	offered, waiting := 0, 0
	for id := range ss.jobs {
		j := s.st.jobs[id]
		switch {
		case j.Status == StatusQueued && j.offered:
			offered++
		case j.Status == StatusQueued:
			waiting++
		case j.Status == StatusInProgress:
			st.TotalRunningJobs++
		}
	}
	st.TotalAssignedJobs = waiting + st.TotalRunningJobs
	st.TotalAvailableJobs, st.TotalAcquiredJobs = waiting, st.TotalRunningJobs
	if ss.offers {
		st.TotalAvailableJobs, st.TotalAcquiredJobs = offered, st.TotalAssignedJobs
	}
	for _, rn := range s.st.runners {
		if rn.scaleSetID != ss.id {
			continue
		}
		st.TotalRegisteredRunners++
		if rn.jobID != 0 {
			st.TotalBusyRunners++
		}
	}
	st.TotalIdleRunners = st.TotalRegisteredRunners - st.TotalBusyRunners
	return st
}

// routeToScaleSet assigns a queued job that no set holds yet to the oldest set that can take
// it. Callers hold s.mu.
func (s *Server) routeToScaleSet(j *job) {
	if j.scaleSetID != 0 || j.Status != StatusQueued {
		return
	}
	ids := make([]int64, 0, len(s.st.scaleSets))
	for id := range s.st.scaleSets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ss := s.st.scaleSets[id]
		if !s.scopeCovers(ss.scope, j) || !labelsMatch(ss.labelNames(), j.Labels) || (!ss.offers && !s.hasRoom(ss)) {
			continue
		}
		j.scaleSetID = ss.id
		ss.jobs[j.ID] = true
		if ss.offers {
			j.offered = true
			s.pushJobMessage(ss, jobAvailable, j, nil)
			return
		}
		s.assign(j, s.now())
		s.pushJobMessage(ss, jobAssigned, j, nil)
		return
	}
}

// hasRoom reports whether the set may be assigned one more job. Callers hold s.mu.
func (s *Server) hasRoom(ss *scaleSet) bool {
	if !ss.capacityKnown {
		return true
	}
	assigned := 0
	for id := range ss.jobs {
		if !s.st.jobs[id].offered {
			assigned++
		}
	}
	return assigned < ss.maxCapacity
}

// setCapacity records the capacity a listener reported; a set given more room takes the jobs
// waiting for it. Callers hold s.mu.
func (s *Server) setCapacity(ss *scaleSet, capacity int) {
	capacity = max(capacity, 0)
	if ss.capacityKnown && ss.maxCapacity == capacity {
		return
	}
	ss.maxCapacity, ss.capacityKnown = capacity, true
	s.routeQueuedToScaleSets()
}

// routeQueuedToScaleSets offers every queued job to the sets, after a set was created,
// changed or deleted, or had room made. Callers hold s.mu.
func (s *Server) routeQueuedToScaleSets() {
	for _, id := range s.st.queued {
		s.routeToScaleSet(s.st.jobs[id])
	}
}

// scaleSetJobStarted tells a set's listener its runner started the job. Callers hold s.mu.
func (s *Server) scaleSetJobStarted(j *job, rn *runner) {
	if ss, ok := s.st.scaleSets[j.scaleSetID]; ok {
		s.pushJobMessage(ss, jobStarted, j, rn)
	}
}

// scaleSetJobCompleted tells a set's listener the job ended, with or without a runner (a job
// cancelled while waiting completes too). Callers hold s.mu.
func (s *Server) scaleSetJobCompleted(j *job) {
	ss, ok := s.st.scaleSets[j.scaleSetID]
	if !ok {
		return
	}
	delete(ss.jobs, j.ID)
	var rn *runner
	if j.RunnerID != 0 {
		rn = &runner{id: j.RunnerID, name: j.RunnerName}
	}
	s.pushJobMessage(ss, jobCompleted, j, rn)
	if ss.capacityKnown {
		s.routeQueuedToScaleSets()
	}
}
