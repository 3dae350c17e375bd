package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/runnerflow/runnerflow/workflows"
)

// onWorkflowJob acts on one workflow_job event:
//   - queued: reserve, through the routed pool's scale window;
//   - in_progress on a live runner of the pool the job was routed to: tell that runner
//     workflow, and only it. The runner tells its pool it is busy with the job (the pool ties
//     the job's reservation to it), so the window would only hear it a second time, at one more
//     billable signal a job;
//   - in_progress otherwise (another pool's runner, a runner runnerflow does not run, a runner
//     whose workflow has already ended): the routed pool's window, which ties the job to its
//     runner or ends the reservation, and the runner workflow if there is one;
//   - completed: release, through the routed pool's window (and the window of the pool whose
//     runner ran the job, if that is another pool), and tell the runner workflow its job is
//     done unless its pool's runners are ephemeral: such a runner ends when its pod exits
//     (the pod watcher tells it) and its final report ends its job's reservation, so the
//     notice would cost a signal a job for nothing. The window hears every completed event:
//     a runner that is ending when its notice arrives accepts the signal and never reads it,
//     and the window is what still ends the job's reservation then;
//   - waiting and anything else: nothing (a waiting job needs no runner until approved).
//
// No GitHub API call is made.
func (h *Handler) onWorkflowJob(ctx context.Context, je jobEvent) answer {
	switch je.event.Action {
	case workflows.JobQueued:
		return h.toWindows(ctx, je)
	case workflows.JobCompleted:
		if h.runsEphemeral(je) {
			return h.toWindows(ctx, je)
		}
		return worst(h.toWindows(ctx, je), h.toRunner(ctx, je, workflows.SignalJobCompleted))
	case workflows.JobInProgress:
		if je.event.RunnerName == "" {
			return answer{http.StatusOK, OutcomeIgnored, "job in progress names no runner"}
		}
		return h.jobNotice(ctx, je, workflows.SignalJobStarted)
	}
	return answer{http.StatusOK, OutcomeIgnored, "action " + je.event.Action + " does not change reservations"}
}

// jobNotice delivers a job's start (see onWorkflowJob): to the runner alone when it is a live
// runner of the routed pool, else to the windows and the runner.
func (h *Handler) jobNotice(ctx context.Context, je jobEvent, signal string) answer {
	runnerPool, _, named := je.runnerWorkflow()
	if !named {
		return h.toWindows(ctx, je)
	}
	pool, routed, err := h.cfg.Pools.Route(ctx, je.target)
	if err != nil {
		return temporalAnswer(err, "listing pools")
	}
	if routed && pool.Name == runnerPool {
		a, delivered := h.signalRunner(ctx, je, signal)
		if delivered || a.status >= 500 {
			return a
		}
		return h.toWindows(ctx, je) // its workflow has ended: its pool hears it through the window
	}
	return worst(h.toWindows(ctx, je), h.toRunner(ctx, je, signal))
}

// toWindows routes the event to its pool and hands it to that pool's scale window (see
// windowTargets for which windows an event concerns) through the group commit: the answer is
// 202 only once the signal carrying it was accepted.
func (h *Handler) toWindows(ctx context.Context, je jobEvent) answer {
	pool, ok, err := h.cfg.Pools.Route(ctx, je.target)
	if err != nil {
		return temporalAnswer(err, "listing pools")
	}
	routed := ""
	if ok {
		routed = pool.Name
	}
	targets := h.windowTargets(je, routed)
	if len(targets) == 0 {
		if je.event.Action == workflows.JobInProgress {
			return answer{http.StatusOK, OutcomeIgnored, "no reservation to end"}
		}
		if je.event.Action == workflows.JobQueued {
			return h.recordUnmatched(ctx, je)
		}
		return answer{http.StatusOK, OutcomeUnrouted, "no pool serves this job's repository and labels"}
	}
	for _, p := range targets {
		if err := h.windows.Commit(ctx, p, je.event); err != nil {
			return temporalAnswer(err, "scale window of pool "+p)
		}
	}
	return answer{http.StatusAccepted, OutcomeAccepted, "pool " + strings.Join(targets, ", ")}
}

// windowTargets names the pools whose reservations an event changes: queued reserves in the
// routed pool; completed releases in the routed pool and in the pool of the runner that ran
// the job when that is another pool; in_progress (naming a runner) goes to the routed pool,
// which ties the reservation to its runner or ends it when the runner is not its own.
func (h *Handler) windowTargets(je jobEvent, routed string) []string {
	runnerPool, _, named := je.runnerWorkflow()
	var targets []string
	switch je.event.Action {
	case workflows.JobQueued:
		if routed != "" {
			targets = append(targets, routed)
		}
	case workflows.JobCompleted:
		if routed != "" {
			targets = append(targets, routed)
		}
		if named && runnerPool != routed && h.knownPool(runnerPool) {
			targets = append(targets, runnerPool)
		}
	case workflows.JobInProgress:
		if routed != "" && je.event.RunnerName != "" {
			targets = append(targets, routed)
		}
	}
	return targets
}

// runsEphemeral reports whether the event names a runner of a pool known to run ephemeral
// runners (MemoPoolEphemeral).
func (h *Handler) runsEphemeral(je jobEvent) bool {
	runnerPool, _, named := je.runnerWorkflow()
	if !named {
		return false
	}
	for _, p := range h.cfg.Pools.Pools() {
		if p.Name == runnerPool {
			return p.Ephemeral
		}
	}
	return false
}

// knownPool reports whether the table holds a pool of that name.
func (h *Handler) knownPool(name string) bool {
	for _, p := range h.cfg.Pools.Pools() {
		if p.Name == name {
			return true
		}
	}
	return false
}

// signalWindow hands a batch of events (the group commit's, see package groupcommit) to the pool's
// current scale window, starting a new window if none is running: the server does both
// atomically, so an event never falls between windows.
func (h *Handler) signalWindow(ctx context.Context, pool string, events []workflows.WorkflowJobEvent) error {
	id := workflows.ScaleWindowWorkflowID(pool)
	_, err := h.cfg.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SignalWorkflowJobs, workflows.WorkflowJobsSignal{Events: events},
		client.StartWorkflowOptions{
			ID:                    id,
			TaskQueue:             workflows.DecisionTaskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SearchAttrPool.ValueSet(pool)),
		},
		workflows.ScaleWindowWorkflowType, workflows.ScaleWindowInput{Pool: pool, Window: h.cfg.Window})
	return err
}

// toRunner forwards a job notice to the runner workflow the event names. A runner that is not
// runnerflow's, or whose workflow has ended, is not an error: GitHub needs no retry for it.
func (h *Handler) toRunner(ctx context.Context, je jobEvent, signal string) answer {
	a, _ := h.signalRunner(ctx, je, signal)
	return a
}

// signalRunner is toRunner, also saying whether the runner workflow got the notice.
func (h *Handler) signalRunner(ctx context.Context, je jobEvent, signal string) (answer, bool) {
	pool, workflowID, ok := je.runnerWorkflow()
	if !ok {
		return answer{http.StatusOK, OutcomeIgnored, "job names no runnerflow runner"}, false
	}
	err := h.cfg.Temporal.SignalWorkflow(ctx, workflowID, "", signal, workflows.JobSignal{
		JobID: je.event.JobID, RunnerName: je.event.RunnerName, Conclusion: je.event.Conclusion, QueuedAt: je.queuedAt, StartedAt: je.startedAt,
	})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		h.cfg.Metrics.runnerSignals.WithLabelValues(signal, "no_workflow").Inc()
		return answer{http.StatusOK, OutcomeIgnored, "no running workflow for runner " + je.event.RunnerName}, false
	case err != nil:
		h.cfg.Metrics.runnerSignals.WithLabelValues(signal, "error").Inc()
		return temporalAnswer(err, "signalling runner "+je.event.RunnerName), false
	}
	h.cfg.Metrics.runnerSignals.WithLabelValues(signal, "sent").Inc()
	if signal == workflows.SignalJobStarted {
		// Only for a runner whose workflow exists, so the pool label names a real pool.
		h.cfg.Metrics.observeJobStart(pool, je.queuedAt, je.startedAt)
	}
	return answer{http.StatusAccepted, OutcomeAccepted, "runner " + je.event.RunnerName}, true
}

// temporalAnswer maps a Temporal failure to the answer GitHub's delivery log should show:
// unreachable, overloaded or too slow is 503 (worth a redelivery once Temporal is back); any
// other refusal is 500.
func temporalAnswer(err error, what string) answer {
	if unavailable(err) {
		return answer{http.StatusServiceUnavailable, OutcomeUnavailable, what + ": Temporal unavailable"}
	}
	return answer{http.StatusInternalServerError, OutcomeFailed, what + ": " + err.Error()}
}

func unavailable(err error) bool {
	var (
		unav      *serviceerror.Unavailable
		deadline  *serviceerror.DeadlineExceeded
		exhausted *serviceerror.ResourceExhausted
		canceled  *serviceerror.Canceled
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &unav), errors.As(err, &deadline), errors.As(err, &exhausted), errors.As(err, &canceled):
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Canceled:
		return true
	}
	return false
}

// worst combines two answers: the one GitHub must see is the more severe.
func worst(a, b answer) answer {
	rank := func(x answer) int {
		switch {
		case x.status >= 500:
			return 3
		case x.status == http.StatusAccepted:
			return 2
		}
		return 1
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
