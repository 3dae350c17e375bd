package workflows

import (
	"slices"
	"testing"
)

func offered(ids ...int64) []ScaleSetJobEvent {
	var out []ScaleSetJobEvent
	for _, id := range ids {
		out = append(out, ScaleSetJobEvent{Event: ScaleSetJobAvailable, RunnerRequestID: id})
	}
	return out
}

func TestPlanScaleSetAcquisition(t *testing.T) {
	many := make([]int64, ScaleSetOffersKept+5)
	for i := range many {
		many[i] = int64(i + 1)
	}
	tests := []struct {
		name          string
		kept          []int64
		msg           ScaleSetMessage
		max           int
		acquire, keep []int64
	}{
		{name: "no offers", msg: ScaleSetMessage{Jobs: []ScaleSetJobEvent{{Event: ScaleSetJobAssigned, RunnerRequestID: 1}}}, max: 10},
		{name: "room for all", msg: ScaleSetMessage{Jobs: offered(3, 1, 2)}, max: 10, acquire: []int64{1, 2, 3}},
		{name: "room for some: the oldest first", msg: ScaleSetMessage{Jobs: offered(3, 1, 2), Statistics: ScaleSetStatistics{AssignedJobs: 8}},
			max: 10, acquire: []int64{1, 2}, keep: []int64{3}},
		{name: "no room: all kept", kept: []int64{4}, msg: ScaleSetMessage{Jobs: offered(5), Statistics: ScaleSetStatistics{AssignedJobs: 12}},
			max: 10, keep: []int64{4, 5}},
		{name: "maximum zero", msg: ScaleSetMessage{Jobs: offered(1)}, max: 0, keep: []int64{1}},
		{name: "kept offers acquired when room appears", kept: []int64{4, 5}, msg: ScaleSetMessage{Statistics: ScaleSetStatistics{AssignedJobs: 9}},
			max: 10, acquire: []int64{4}, keep: []int64{5}},
		{name: "an offer offered again counts once", kept: []int64{4}, msg: ScaleSetMessage{Jobs: offered(4)}, max: 10, acquire: []int64{4}},
		{name: "an offer the message settles is not acquired", kept: []int64{4, 6},
			msg: ScaleSetMessage{Jobs: append(offered(5), ScaleSetJobEvent{Event: ScaleSetJobAssigned, RunnerRequestID: 4},
				ScaleSetJobEvent{Event: ScaleSetJobCompleted, RunnerRequestID: 6, Result: "canceled"})},
			max: 10, acquire: []int64{5}},
		{name: "taken back and offered again in one message: acquired", kept: []int64{40},
			msg: ScaleSetMessage{Jobs: append(offered(40), ScaleSetJobEvent{Event: ScaleSetJobCompleted, RunnerRequestID: 40, Result: "canceled"})},
			max: 10, acquire: []int64{40}},
		{name: "a kept offer completed without a new offer: gone", kept: []int64{40},
			msg: ScaleSetMessage{Jobs: []ScaleSetJobEvent{{Event: ScaleSetJobCompleted, RunnerRequestID: 40, Result: "canceled"}}}, max: 10},
		{name: "kept offers are bounded, the newest let go", kept: many, msg: ScaleSetMessage{Statistics: ScaleSetStatistics{AssignedJobs: 10}},
			max: 10, keep: many[:ScaleSetOffersKept]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanScaleSetAcquisition(tt.kept, tt.msg, tt.max)
			if !slices.Equal(got.Acquire, tt.acquire) || !slices.Equal(got.Keep, tt.keep) {
				t.Errorf("acquire %v keep %v; want acquire %v keep %v", got.Acquire, got.Keep, tt.acquire, tt.keep)
			}
		})
	}
}
