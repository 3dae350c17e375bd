package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-github/v92/github"

	"github.com/runnerflow/runnerflow/workflows"
)

// jobEvent is one workflow_job delivery as the starter acts on it.
type jobEvent struct {
	// event is what the scale window and, through it, the pool get.
	event workflows.WorkflowJobEvent
	// target is what routing needs.
	target JobTarget
	// queuedAt and startedAt are GitHub's created_at and started_at of the job (zero when
	// absent): the job-start latency, measured at no API cost.
	queuedAt, startedAt time.Time
}

// enterpriseOnly reads the one field of a workflow_job payload that go-github's
// WorkflowJobEvent lacks: the enterprise the repository belongs to.
type enterpriseOnly struct {
	Enterprise *struct {
		Slug string `json:"slug"`
	} `json:"enterprise"`
}

// parseWorkflowJob parses a verified workflow_job payload with go-github's parser. An error
// means the payload is not a workflow_job event GitHub could have sent (answered 400).
func parseWorkflowJob(deliveryID string, payload []byte) (jobEvent, error) {
	parsed, err := github.ParseWebHook("workflow_job", payload)
	if err != nil {
		return jobEvent{}, err
	}
	e, ok := parsed.(*github.WorkflowJobEvent)
	if !ok {
		return jobEvent{}, fmt.Errorf("parsed workflow_job as %T", parsed)
	}
	wj := e.GetWorkflowJob()
	if wj.GetID() <= 0 || e.GetAction() == "" {
		return jobEvent{}, errors.New("workflow_job event without action or workflow_job.id")
	}
	var ent enterpriseOnly
	if err := json.Unmarshal(payload, &ent); err != nil {
		return jobEvent{}, err
	}
	je := jobEvent{
		event: workflows.WorkflowJobEvent{
			DeliveryID: deliveryID,
			JobID:      wj.GetID(),
			RunID:      wj.GetRunID(),
			Action:     e.GetAction(),
			Repository: e.GetRepo().GetFullName(),
			Labels:     wj.Labels,
			RunnerName: wj.GetRunnerName(),
			Conclusion: wj.GetConclusion(),
			// The run's facts a prewarming pool predicts from (workflows.WorkflowJobEvent).
			HeadSHA:      wj.GetHeadSHA(),
			WorkflowName: wj.GetWorkflowName(),
			JobName:      wj.GetName(),
		},
		target: JobTarget{
			Repository:  e.GetRepo().GetFullName(),
			Owner:       e.GetRepo().GetOwner().GetLogin(),
			OwnerIsUser: e.GetRepo().GetOwner().GetType() == "User",
			Labels:      wj.Labels,
		},
	}
	je.queuedAt, je.startedAt = wj.GetCreatedAt().Time, wj.GetStartedAt().Time
	je.event.StartedAt, je.event.CompletedAt = jobTimes(e.GetAction(), wj)
	if ent.Enterprise != nil {
		je.target.Enterprise = ent.Enterprise.Slug
	}
	if je.target.Repository == "" {
		return jobEvent{}, errors.New("workflow_job event without repository.full_name")
	}
	return je, nil
}

// jobTimes are the job's start and completion as GitHub reports them, only on the events
// where they mean that: GitHub fills a queued job's started_at with its created_at, so a
// start is read from in_progress and completed events, a completion from completed ones.
// Both UTC, as a pool's history holds them.
func jobTimes(action string, wj *github.WorkflowJob) (started, completed time.Time) {
	switch action {
	case workflows.JobCompleted:
		completed = wj.GetCompletedAt().UTC()
		fallthrough
	case workflows.JobInProgress:
		started = wj.GetStartedAt().UTC()
	}
	return started, completed
}

// runnerWorkflow returns the workflow id of the runnerflow runner a job event names, if the
// name is one runnerflow gives. Hosted runners ("GitHub Actions 5") and other systems' runners
// do not parse; a name that parses but is not ours finds no workflow (answered as ignored).
func (je jobEvent) runnerWorkflow() (pool, workflowID string, ok bool) {
	name := je.event.RunnerName
	if name == "" {
		return "", "", false
	}
	pool, ok = workflows.PoolFromRunnerName(name)
	if !ok {
		return "", "", false
	}
	return pool, workflows.RunnerWorkflowID(pool, name), true
}
