package workflows

import "go.temporal.io/sdk/workflow"

// WorkflowJobsSignal carries the workflow_job events of several webhook deliveries to one pool's
// scale window (SignalWorkflowJobs), in the order the starter received them. The starter
// groups the deliveries that arrive while its previous signal to the same window is in flight,
// so a flood of events costs one Temporal round trip and one signal per batch rather than per
// event. It carries no secret.
type WorkflowJobsSignal struct {
	Events []WorkflowJobEvent `json:"events"`
}

// WorkflowJobsSignalMaxEvents bounds one SignalWorkflowJobs batch: at a few hundred bytes of
// names and labels per event, 500 of them stay far below Temporal's payload size limit (2 MB by
// default), and a larger batch would only delay the acknowledgements waiting on it.
const WorkflowJobsSignalMaxEvents = 500

// windowInbox is where a scale window's events arrive: one event per SignalWorkflowJob signal
// (the starters of the previous release, and signals already in histories they wrote), or a
// batch per SignalWorkflowJobs signal. Reading a signal channel issues no workflow command, so
// listening on the second channel changes nothing a recorded history replays.
//
// A window run by a worker of the previous release never reads SignalWorkflowJobs: its batches
// would be dropped when the run completes. Workers therefore must run this release before any
// starter does (the release notes say so).
type windowInbox struct {
	single  workflow.ReceiveChannel
	batches workflow.ReceiveChannel
}

func newWindowInbox(ctx workflow.Context) windowInbox {
	return windowInbox{
		single:  workflow.GetSignalChannel(ctx, SignalWorkflowJob),
		batches: workflow.GetSignalChannel(ctx, SignalWorkflowJobs),
	}
}

// addTo makes sel take one ready signal from either channel and hand its events to take, in
// the order they were sent. ReceiveAsync skips a payload that does not decode (the SDK logs
// it), so a corrupt signal cannot wedge the window.
func (in windowInbox) addTo(sel workflow.Selector, take func(WorkflowJobEvent)) {
	sel.AddReceive(in.single, func(c workflow.ReceiveChannel, _ bool) {
		var ev WorkflowJobEvent
		if c.ReceiveAsync(&ev) {
			take(ev)
		}
	})
	sel.AddReceive(in.batches, func(c workflow.ReceiveChannel, _ bool) {
		var batch WorkflowJobsSignal
		if c.ReceiveAsync(&batch) {
			for _, ev := range batch.Events {
				take(ev)
			}
		}
	})
}

// drain hands every event already delivered to either channel to take. Events of one starter
// come through one channel, so their order is kept; events of starters of two releases have
// no order between them to keep (GitHub promises none either).
func (in windowInbox) drain(take func(WorkflowJobEvent)) {
	for {
		var ev WorkflowJobEvent
		if !in.single.ReceiveAsync(&ev) {
			break
		}
		take(ev)
	}
	for {
		var batch WorkflowJobsSignal
		if !in.batches.ReceiveAsync(&batch) {
			break
		}
		for _, ev := range batch.Events {
			take(ev)
		}
	}
}
