package webhook

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/workflows"
)

// recordUnmatched hands a queued job no pool fits to the unmatched-jobs workflow, so `starter
// why` can say so later (workflows/unmatched.go). Only a job that may be meant for runnerflow
// is recorded: one asking for "self-hosted" or sharing a label with one of the pools. An
// organization's webhook also delivers every job for GitHub-hosted runners; recording those
// would cost a signal each and crowd out the jobs a user asks about.
func (h *Handler) recordUnmatched(ctx context.Context, je jobEvent) answer {
	unrouted := answer{http.StatusOK, OutcomeUnrouted, "no pool serves this job's repository and labels"}
	if !h.mayBeOurs(je.event.Labels) {
		return unrouted
	}
	job := workflows.UnmatchedJob{
		JobID: je.event.JobID, Repository: je.event.Repository, Labels: je.event.Labels,
		DeliveryID: je.event.DeliveryID, At: je.event.At,
	}
	_, err := h.cfg.Temporal.SignalWithStartWorkflow(ctx, workflows.UnmatchedJobsWorkflowID, workflows.SignalUnmatchedJob, job,
		client.StartWorkflowOptions{ID: workflows.UnmatchedJobsWorkflowID, TaskQueue: workflows.DecisionTaskQueue},
		workflows.UnmatchedJobsWorkflowType, workflows.UnmatchedJobsInput{})
	h.cfg.Metrics.observeUnmatched(err)
	if err != nil {
		// The delivery itself asked for nothing runnerflow can do; losing its record only
		// loses an explanation, so GitHub is not asked to redeliver it.
		h.log.Warn("Cannot record an unmatched job", "jobID", job.JobID, "deliveryID", job.DeliveryID, "error", err)
	}
	return unrouted
}

// mayBeOurs reports whether a job's labels ask for a self-hosted runner or name a label of one
// of the pools.
func (h *Handler) mayBeOurs(labels []string) bool {
	pools := h.cfg.Pools.Pools()
	return slices.ContainsFunc(labels, func(l string) bool {
		l = strings.ToLower(l)
		return l == "self-hosted" || slices.ContainsFunc(pools, func(p Pool) bool { return slices.Contains(p.Labels, l) })
	})
}
