package workflows

import "time"

// webhooksOnly is the demand of a pool that learns of its jobs from webhooks alone: the scale
// windows turn workflow_job events into reservations (UpdateReservations), and Decide counts
// the active ones with the runners busy elsewhere. The reservation book is the pool's own,
// which every source counts on (pool_reservations.go), so this source has nothing of its own
// to do.
type webhooksOnly struct{}

func (webhooksOnly) hear(demandNews)              {}
func (webhooksOnly) tend(time.Time)               {}
func (webhooksOnly) want(time.Time) *Demand       { return nil }
func (webhooksOnly) wake(time.Time) (t time.Time) { return t }
func (webhooksOnly) busy() bool                   { return false }
func (webhooksOnly) status(*PoolStatus)           {}
