package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// How the pool harness delivers messages across continue-as-new.
//
// The test environment runs everything through one queue of callbacks, and when a run ends it
// drops whatever is still queued. A message the harness sends is queued behind callbacks other
// goroutines posted first: an activity's result, or a timer the environment fired on the wall
// clock because an activity was running. When one of those makes the pool continue as new, the
// message is dropped, and which one comes first depends on goroutine scheduling. A server does
// not lose it: it refuses to complete a run while a signal is unseen, and an update admitted
// but not yet seen by a run that continues as new is aborted with a retryable error and lands
// on the new run (temporalio/temporal#6485).
//
// So the harness counts a message as sent only once the pool has seen it — a signal when the
// pool's inbound interceptor receives it, an update when the pool accepts or rejects it — and
// sends a message the run never saw again to the next run, as the server would.

// poolMessage is one signal or update to the pool.
type poolMessage struct {
	// signal is the signal's name; empty for an update.
	signal string
	// update is the update's name and label its id and the key of its recorded outcome.
	update, label string
	arg           any
}

// send schedules a message to the pool as its own event, so no two messages share an instant.
func (h *poolHarness) send(m poolMessage) {
	now := h.start
	if h.env != nil {
		now = h.env.Now()
	}
	h.scheduleEvent(&poolEvent{at: now, msg: &m})
}

// deliver hands a message event to the test environment. It is marked fired when the pool sees
// it (witnessSignal, or the update's callbacks), not here.
func (h *poolHarness) deliver(ev *poolEvent) {
	m := ev.msg
	if m.update == "" {
		h.inTransit = append(h.inTransit, ev)
		h.env.SignalWorkflow(m.signal, m.arg)
		return
	}
	seen := func() { ev.fired = true }
	h.env.UpdateWorkflow(m.update, m.label, &testsuite.TestUpdateCallback{
		OnReject: func(e error) {
			seen()
			h.setOutcome(m.label, updateOutcome{rejected: e})
		},
		OnAccept: seen,
		OnComplete: func(r any, e error) {
			h.setOutcome(m.label, updateOutcome{failed: e, result: r})
		},
	}, m.arg)
}

// witnessSignal is called as a signal reaches the pool workflow. The environment delivers
// signals in the order they were sent, so it is the oldest one in transit.
func (h *poolHarness) witnessSignal(name string) {
	if len(h.inTransit) == 0 {
		h.t.Errorf("the pool received signal %s that the harness did not send", name)
		return
	}
	ev := h.inTransit[0]
	h.inTransit = h.inTransit[1:]
	if ev.msg.signal != name {
		h.t.Errorf("the pool received signal %s, but the oldest signal in transit is %s", name, ev.msg.signal)
	}
	ev.fired = true
}

// deliveryWitness sees every signal as the environment hands it to a workflow: one to the pool
// confirms a message, one to a runner double plays that runner's drain. Both happen in the
// same callback as the delivery, so neither is lost when the pool continues as new before the
// receiving coroutine runs.
type deliveryWitness struct {
	interceptor.WorkerInterceptorBase
	h *poolHarness
}

// InterceptWorkflow wraps the inbound side of the pool workflow and of the runner doubles.
func (w *deliveryWitness) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	info := workflow.GetInfo(ctx)
	return &deliveryWitnessInbound{
		WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next},
		h:                              w.h,
		workflowType:                   info.WorkflowType.Name,
		workflowID:                     info.WorkflowExecution.ID,
	}
}

type deliveryWitnessInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	h                        *poolHarness
	workflowType, workflowID string
}

// ExecuteWorkflow notes that the pool's run has begun: by the time the test's next callback
// runs, its first workflow task (which registers the handlers) has run.
func (i *deliveryWitnessInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if i.workflowType == PoolWorkflowType {
		i.h.runStarted = true
	}
	return i.Next.ExecuteWorkflow(ctx, in)
}

// HandleSignal records the delivery before passing the signal on.
func (i *deliveryWitnessInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	switch {
	case i.workflowType == PoolWorkflowType:
		i.h.witnessSignal(in.SignalName)
	case i.workflowType == RunnerWorkflowType && in.SignalName == SignalDrain:
		i.h.drain(runnerNameOf(i.workflowID))
	case i.workflowType == RunnerWorkflowType && in.SignalName == SignalForceRemove:
		var req ForceRemoveRequest
		if err := converter.GetDefaultDataConverter().FromPayloads(in.Arg, &req); err != nil {
			i.h.t.Errorf("decode force-remove: %v", err)
		}
		i.h.forceRemove(runnerNameOf(i.workflowID), req)
	}
	return i.Next.HandleSignal(ctx, in)
}
