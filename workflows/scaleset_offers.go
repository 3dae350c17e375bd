package workflows

import (
	"slices"
)

// ScaleSetAcquisition is what the listener does with the jobs its set was offered: acquire
// some now, keep the rest for a later message.
type ScaleSetAcquisition struct {
	// Acquire are the offers to acquire now, oldest request first.
	Acquire []int64
	// Keep are offers left for when the set has room (at most ScaleSetOffersKept).
	Keep []int64
}

// PlanScaleSetAcquisition decides which offered jobs the listener acquires after a message.
// The service (GHES) offers a job to a set and assigns it only once the set's listener
// acquires it; the set acquires no more than it may run: its maximum less the jobs the
// message's statistics say it holds already. Offers it has no room for are kept, oldest
// first, and acquired when a later message shows room. An offer the message names as assigned
// or started is the set's, and one a message completes without offering it again is gone:
// neither needs acquiring. A job completed and offered in the same message was taken back
// and offered again (reassignment: the client groups a message's events by type, so their
// order is lost): the offer stands, since acquiring a job that is over acquires nothing.
// Acquiring twice is harmless: the service answers only the jobs the set did not hold.
func PlanScaleSetAcquisition(kept []int64, m ScaleSetMessage, maxCapacity int) ScaleSetAcquisition {
	pending := slices.Clone(kept)
	offered, settled := map[int64]bool{}, map[int64]bool{}
	for _, e := range m.Jobs {
		if e.Event == ScaleSetJobAvailable {
			pending = insertSorted(pending, e.RunnerRequestID)
			offered[e.RunnerRequestID] = true
		}
	}
	for _, e := range m.Jobs {
		switch e.Event {
		case ScaleSetJobAssigned, ScaleSetJobStarted:
			settled[e.RunnerRequestID] = true
		case ScaleSetJobCompleted:
			settled[e.RunnerRequestID] = settled[e.RunnerRequestID] || !offered[e.RunnerRequestID]
		}
	}
	pending = slices.DeleteFunc(pending, func(id int64) bool { return settled[id] })
	room := max(0, min(maxCapacity-m.Statistics.AssignedJobs, len(pending)))
	out := ScaleSetAcquisition{Acquire: pending[:room:room], Keep: slices.Clone(pending[room:])}
	if n := len(out.Keep) - ScaleSetOffersKept; n > 0 {
		// The listener's state stays bounded across continue-as-new; the newest offers, which
		// waited least, are the ones let go.
		out.Keep = out.Keep[:ScaleSetOffersKept]
	}
	if len(out.Acquire) == 0 {
		out.Acquire = nil
	}
	if len(out.Keep) == 0 {
		out.Keep = nil
	}
	return out
}
