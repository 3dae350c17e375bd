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
// first, and acquired when a later message shows room; an offer the message names as
// assigned, started or completed is the set's, or gone, and needs no acquiring. Acquiring
// twice is harmless: the service answers only the jobs the set did not hold.
func PlanScaleSetAcquisition(kept []int64, m ScaleSetMessage, maxCapacity int) ScaleSetAcquisition {
	pending := slices.Clone(kept)
	settled := map[int64]bool{}
	for _, e := range m.Jobs {
		if e.Event == ScaleSetJobAvailable {
			pending = insertSorted(pending, e.RunnerRequestID)
		} else {
			settled[e.RunnerRequestID] = true
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
