package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ScaleWindowInput starts one scale window of a pool. The starter starts it with
// signal-with-start on ScaleWindowWorkflowID(pool), so the first event arrives with the start.
type ScaleWindowInput struct {
	Pool string `json:"pool"`
	// Window is how long the window collects events after its first one; zero means
	// DefaultScaleWindow.
	Window time.Duration `json:"window,omitempty"`
	// Carried holds the events that arrived while the previous window was applying its batch;
	// set only by continue-as-new. They open this window.
	Carried []WorkflowJobEvent `json:"carried,omitempty"`
}

// ScaleWindowResult says what one window did.
type ScaleWindowResult struct {
	// Events is the number of distinct events in the run's batches (one per window).
	Events int `json:"events"`
	// Duplicates counts events dropped as redeliveries (same delivery id, or same job and action).
	Duplicates int `json:"duplicates"`
	// Applied is the pool's answer to the batch; zero when no batch was sent or it failed, and
	// since changeSignalPool (a signal has no answer: see Signalled).
	Applied ReservationBatchResult `json:"applied"`
	// Signalled counts the events handed to the pool by signal (changeSignalPool).
	Signalled int `json:"signalled,omitempty"`
	// UpdateError is set when the pool did not take the batch (pool gone, batch rejected).
	UpdateError string `json:"updateError,omitempty"`
	// Carried is the number of events handed to the next run.
	Carried int `json:"carried,omitempty"`
}

// ActivityUpdatePoolReservations sends one scale window's batch to its pool as the
// UpdateReservations update and waits for the pool's answer (activities.TemporalActivities).
//
// Why an activity calling client.UpdateWorkflow rather than a signal to the pool: the pool's
// UpdateReservations handler validates and applies the batch and answers with what it did, so
// the window completes only once the pool has durably taken its batch, and that answer is kept
// in the window's history. The update id is the window's workflow and run id, so a retried
// activity is deduplicated by the server; and because reservations are keyed by job, even a
// batch applied twice (say across the pool's continue-as-new) changes nothing the second time.
const ActivityUpdatePoolReservations = "UpdatePoolReservations"

// UpdatePoolReservationsInput is one batch for one pool.
type UpdatePoolReservationsInput struct {
	Pool string `json:"pool"`
	// UpdateID makes the update idempotent: the sending window's "<workflow id>/<run id>".
	UpdateID string           `json:"updateId"`
	Batch    ReservationBatch `json:"batch"`
}

// ScaleWindowWorkflow collects a pool's workflow_job events for one window (from its first
// event), drops duplicates, and hands them to the pool with one SignalReservations signal (an
// UpdateReservations update through an activity before changeSignalPool).
// Events arrive one per SignalWorkflowJob or in batches of SignalWorkflowJobs (the starter's
// group commit); both are the same events to the window, deduplicated alike.
// Events that arrive while that update is in flight are drained and open the next window, in
// the same run while a flood lasts and by continue-as-new once Temporal suggests a new run
// (see nextWindowInThisRun); events that arrive after this run has closed start the next run
// by signal-with-start. Because the run drains its channels in the same workflow task that
// completes it, and the server refuses to complete a run that has unseen signals, no event is
// lost between windows.
//
// The window that opens on an idle pool (not one carried on from a busy window) hands its
// opening events to the pool at once, so the first job of a quiet pool waits for no window;
// the events after them are batched as before.
//
// Job-started and job-completed notifications for runner workflows do not pass through here:
// the starter signals the runner workflow directly, so a runner learns it is busy without the
// window's delay and without adding to the window's history.
//
// Its change ids (workflow.GetVersion) are listed in Changes (changes.go).
func ScaleWindowWorkflow(ctx workflow.Context, in ScaleWindowInput) (ScaleWindowResult, error) {
	if in.Pool == "" {
		return ScaleWindowResult{}, temporal.NewNonRetryableApplicationError("scale window: pool is empty", ErrInvalidSpec, nil)
	}
	w := &scaleWindow{
		in:     in,
		window: in.Window,
		inbox:  newWindowInbox(ctx),
		seen:   make(map[string]bool),
		logger: log.With(workflow.GetLogger(ctx), "pool", in.Pool),
	}
	if w.window <= 0 {
		w.window = DefaultScaleWindow
	}
	return w.run(ctx)
}

// scaleWindow is one run of the scale-window workflow.
type scaleWindow struct {
	in     ScaleWindowInput
	window time.Duration
	inbox  windowInbox
	// events is the batch in arrival order; seen holds its dedupe keys (lookup only).
	events []WorkflowJobEvent
	seen   map[string]bool
	// sent counts the events already handed to the pool; events[sent:] are still held.
	sent int
	// windowStart is where the current window's events begin in events (0 for the run's first
	// window, whose opening events count towards ScaleWindowMaxEvents as they always have).
	windowStart int
	result      ScaleWindowResult
	logger      log.Logger
}

// changeOpenAtOnce gates applying an idle pool's opening events without waiting the window.
const changeOpenAtOnce = "open-at-once"

// changeRunSpansWindows gates running the next window in the same run (nextWindowInThisRun).
const changeRunSpansWindows = "run-spans-windows"

// changeSignalPool gates handing a batch to the pool by signal (see applyToPool).
const changeSignalPool = "signal-pool"

// changeOpenOnDemand gates opensWithDemand.
const changeOpenOnDemand = "open-on-demand"

// opensWithDemand reports whether the opening events go to the pool at once: since
// changeOpenOnDemand only when one of them is a queued job (demand a runner waits on); a window
// opened by completed or in_progress events alone (a burst's jobs ending one by one) takes them
// with the rest of its window, one signal to the pool instead of two.
func (w *scaleWindow) opensWithDemand(ctx workflow.Context) bool {
	if workflow.GetVersion(ctx, changeOpenOnDemand, workflow.DefaultVersion, 1) < 1 {
		return true
	}
	return slices.ContainsFunc(w.events, func(ev WorkflowJobEvent) bool { return ev.Action == JobQueued })
}

// ScaleWindowStatus answers the window's status query: what it holds and whether the pool
// has taken it yet (a window whose pool is unreachable keeps its events and says so here).
type ScaleWindowStatus struct {
	Pool string `json:"pool"`
	// Events counts the distinct events of this run; Held those not yet taken by the pool.
	Events int `json:"events"`
	Held   int `json:"held"`
	// Applied sums the pool's answers so far.
	Applied ReservationBatchResult `json:"applied"`
}

// run reads as the window's steps.
func (w *scaleWindow) run(ctx workflow.Context) (ScaleWindowResult, error) {
	for _, ev := range w.in.Carried {
		w.add(ev)
	}
	if err := w.setupQuery(ctx); err != nil {
		return w.result, err
	}
	if !w.awaitFirstEvent(ctx) {
		return w.result, nil
	}
	if len(w.in.Carried) == 0 && workflow.GetVersion(ctx, changeOpenAtOnce, workflow.DefaultVersion, 1) >= 1 {
		w.drainInto(&w.events)
		if w.opensWithDemand(ctx) {
			w.applyToPool(ctx, "/opening")
		}
	}
	for window := 1; ; window++ {
		w.collect(ctx)
		w.drainInto(&w.events)
		w.result.Events = len(w.events)
		if w.sent < len(w.events) {
			w.applyToPool(ctx, windowSuffix(window))
		}
		next := w.drainNext()
		if len(next) == 0 {
			return w.result, nil
		}
		w.logger.Info("events arrived during the update; they open the next window", "events", len(next))
		if !w.nextWindowInThisRun(ctx) {
			w.result.Carried = len(next)
			return w.result, workflow.NewContinueAsNewError(onDecisionQueue(ctx, askWindowDecidesApart), ScaleWindowWorkflowType,
				ScaleWindowInput{Pool: w.in.Pool, Window: w.in.Window, Carried: next})
		}
		w.windowStart = len(w.events)
		w.events = append(w.events, next...)
	}
}

// nextWindowInThisRun reports whether the events that arrived during an update open the next
// window in this run rather than in a new one.
//
// Why not always a new run: a run's close races with the signals of a flood. Temporal refuses
// to close a run while signals it has not shown the workflow are waiting, and then refuses
// every signal until the run has closed ("workflow is closing", which the starter's client
// retries after about 400 ms); meanwhile the deliveries behind that signal wait. With a new
// run per 3-second window, a flood of 500 events a second per pool met that stall every 3 to 4
// seconds (p99 ack 0.4 s); with one run for many windows, only when Temporal suggests a new
// run because the history has grown (about every 15 seconds of such a flood), or at
// runMaxEvents.
func (w *scaleWindow) nextWindowInThisRun(ctx workflow.Context) bool {
	if workflow.GetVersion(ctx, changeRunSpansWindows, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	return !workflow.GetInfo(ctx).GetContinueAsNewSuggested() && len(w.events) < runMaxEvents
}

// runMaxEvents bounds the events one run remembers (for deduplication) when the server never
// suggests continuing as new: about 40 seconds of a flood of 500 events a second.
const runMaxEvents = 10 * ScaleWindowMaxEvents

// windowSuffix tells the pool updates of a run's windows apart: the first keeps the id the
// releases before changeRunSpansWindows gave it.
func windowSuffix(window int) string {
	if window == 1 {
		return ""
	}
	return fmt.Sprintf("/window-%d", window)
}

// awaitFirstEvent waits for the event that opens the window. A run started without one (not
// by the starter) closes after one window length with nothing to do.
func (w *scaleWindow) awaitFirstEvent(ctx workflow.Context) bool {
	if len(w.events) > 0 {
		return true
	}
	timedOut := false
	sel := workflow.NewSelector(ctx)
	w.inbox.addTo(sel, w.add)
	sel.AddFuture(workflow.NewTimer(ctx, w.window), func(workflow.Future) { timedOut = true })
	for len(w.events) == 0 && !timedOut {
		sel.Select(ctx)
	}
	return len(w.events) > 0
}

// collect receives events until the window's time is up or it holds ScaleWindowMaxEvents. A
// batch signal is taken whole, so a full window may exceed that bound by less than one batch
// (WorkflowJobsSignalMaxEvents).
func (w *scaleWindow) collect(ctx workflow.Context) {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	closed := false
	sel := workflow.NewSelector(ctx)
	w.inbox.addTo(sel, w.add)
	sel.AddFuture(workflow.NewTimer(timerCtx, w.window), func(workflow.Future) { closed = true })
	for !closed && len(w.events)-w.windowStart < ScaleWindowMaxEvents {
		sel.Select(ctx)
	}
}

// drainInto moves every event already delivered to the window into dst, deduplicated.
func (w *scaleWindow) drainInto(dst *[]WorkflowJobEvent) {
	w.inbox.drain(func(ev WorkflowJobEvent) {
		if w.isNew(ev) {
			*dst = append(*dst, ev)
		}
	})
}

// drainNext collects what arrived during the update: the next window's opening events.
func (w *scaleWindow) drainNext() []WorkflowJobEvent {
	var next []WorkflowJobEvent
	w.drainInto(&next)
	return next
}

// add appends an event to the batch unless it is a duplicate.
func (w *scaleWindow) add(ev WorkflowJobEvent) {
	if w.isNew(ev) {
		w.events = append(w.events, ev)
	}
}

// isNew records the event's dedupe keys and reports whether none was seen before: the same
// delivery id is a redelivery; the same job and action is the same fact delivered twice.
func (w *scaleWindow) isNew(ev WorkflowJobEvent) bool {
	byJob := fmt.Sprintf("job/%d/%s", ev.JobID, ev.Action)
	byDelivery := "delivery/" + ev.DeliveryID
	if w.seen[byJob] || (ev.DeliveryID != "" && w.seen[byDelivery]) {
		w.result.Duplicates++
		return false
	}
	w.seen[byJob] = true
	if ev.DeliveryID != "" {
		w.seen[byDelivery] = true
	}
	return true
}

// applyToPool sends the events not yet sent as one update to the pool; suffix tells this run's
// updates apart (the update id deduplicates retries of the same update). The update is retried
// for as long as the pool is unreachable (ReservationUpdatePolicy): these events were
// acknowledged to GitHub, which will not send them again. Only a pool that no longer exists or
// refuses the batch fails it; that is recorded, not returned, so the events still waiting in
// the channel reach the next window.
func (w *scaleWindow) applyToPool(ctx workflow.Context, suffix string) {
	info := workflow.GetInfo(ctx)
	id := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + suffix
	batch := w.events[w.sent:]
	if workflow.GetVersion(ctx, changeSignalPool, workflow.DefaultVersion, 1) >= 1 {
		w.signalPool(ctx, ReservationBatch{WindowID: id, Events: batch})
		return
	}
	out, err := updatePoolReservations(ctx, UpdatePoolReservationsInput{
		Pool:     w.in.Pool,
		UpdateID: id,
		Batch:    ReservationBatch{WindowID: id, Events: batch},
	})
	w.sent = len(w.events)
	if err != nil {
		w.result.UpdateError = err.Error()
		w.logger.Error("pool did not take the scale window's batch", "events", len(batch), "error", err)
		return
	}
	w.result.Applied.Added += out.Added
	w.result.Applied.Released += out.Released
	w.result.Applied.Expired += out.Expired
	w.result.Applied.Active = out.Active
}

// signalPool hands the batch to the pool as a signal: one billable action where the activity
// and the update it sent were two, and the batch is durable in the pool's history as soon as the
// server took the signal, whether or not the pool's worker runs at that moment (an update waits
// for the pool's worker). The pool applies a batch as it applied the update (by job and action,
// so a batch delivered twice changes nothing), without an answer; a pool that does not exist
// fails the signal, which is recorded like a refused update, so the events still waiting in the
// channel reach the next window.
func (w *scaleWindow) signalPool(ctx workflow.Context, batch ReservationBatch) {
	err := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID(w.in.Pool), "", SignalReservations, batch).Get(ctx, nil)
	w.sent = len(w.events)
	if err != nil {
		w.result.UpdateError = err.Error()
		w.logger.Error("pool did not take the scale window's batch", "events", len(batch.Events), "error", err)
		return
	}
	w.result.Signalled += len(batch.Events)
}

// setupQuery answers QueryStatus with what the window holds.
func (w *scaleWindow) setupQuery(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, QueryStatus, func() (ScaleWindowStatus, error) {
		return ScaleWindowStatus{
			Pool: w.in.Pool, Events: len(w.events), Held: len(w.events) - w.sent, Applied: w.result.Applied,
		}, nil
	})
}

// updatePoolReservations is the typed call of ActivityUpdatePoolReservations.
func updatePoolReservations(ctx workflow.Context, in UpdatePoolReservationsInput) (ReservationBatchResult, error) {
	var out ReservationBatchResult
	ctx = workflow.WithActivityOptions(ctx, ReservationUpdatePolicy)
	err := workflow.ExecuteActivity(ctx, ActivityUpdatePoolReservations, in).Get(ctx, &out)
	return out, err
}
