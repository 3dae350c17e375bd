package main

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Actions are Temporal Cloud's billable actions as far as a workflow history shows them,
// following Temporal's published list (docs.temporal.io/cloud/actions): a workflow start
// (client, continue-as-new or child), a signal, an activity attempt, a timer, an accepted
// update, a child workflow start, a search-attribute or memo upsert, and the markers of one
// workflow task. Queries, activity heartbeats and rejected updates are billed too but leave no event,
// so they are not here (runnerflow's workflows do not heartbeat; the benchmark's own status
// queries are not runnerflow's cost).
type Actions struct {
	WorkflowStarts         int `json:"workflowStarts"`
	Signals                int `json:"signals"`
	Activities             int `json:"activities"`
	Timers                 int `json:"timers"`
	Updates                int `json:"updates"`
	ChildStarts            int `json:"childStarts"`
	SearchAttributeUpserts int `json:"searchAttributeUpserts"`
	Markers                int `json:"markers"`
	Other                  int `json:"other"`
}

// Total sums the actions.
func (a Actions) Total() int {
	return a.WorkflowStarts + a.Signals + a.Activities + a.Timers + a.Updates + a.ChildStarts +
		a.SearchAttributeUpserts + a.Markers + a.Other
}

func (a *Actions) add(b Actions) {
	a.WorkflowStarts += b.WorkflowStarts
	a.Signals += b.Signals
	a.Activities += b.Activities
	a.Timers += b.Timers
	a.Updates += b.Updates
	a.ChildStarts += b.ChildStarts
	a.SearchAttributeUpserts += b.SearchAttributeUpserts
	a.Markers += b.Markers
	a.Other += b.Other
}

// HistoryCost is what a set of workflow runs cost Temporal: runs, history events and actions.
type HistoryCost struct {
	Runs    int     `json:"runs"`
	Events  int     `json:"events"`
	Actions Actions `json:"actions"`
}

func (h *HistoryCost) add(o HistoryCost) {
	h.Runs += o.Runs
	h.Events += o.Events
	h.Actions.add(o.Actions)
}

// countHistory counts the events of one run at or after since, and the actions they stand
// for. A start directly followed by a signal is a signal-with-start, which Temporal bills as
// one action; a child start is billed twice (the parent's initiation and the child's start,
// each counted in its own history).
func countHistory(events []*historypb.HistoryEvent, since time.Time) HistoryCost {
	cost := HistoryCost{Runs: 1}
	markerTasks := map[int64]bool{}
	for i, ev := range events {
		if ev.GetEventTime().AsTime().Before(since) {
			continue
		}
		cost.Events++
		a := &cost.Actions
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a.WorkflowStarts++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if !signalWithStart(events, i) {
				a.Signals++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a.Activities++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// Retries leave no event of their own; the started event carries the attempt.
			a.Activities += max(int(ev.GetActivityTaskStartedEventAttributes().GetAttempt())-1, 0)
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			a.Timers++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			a.Updates++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			a.ChildStarts++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if billedUpsert(ev) {
				a.SearchAttributeUpserts++
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			attrs := ev.GetMarkerRecordedEventAttributes()
			if attrs.GetMarkerName() != "Version" && !markerTasks[attrs.GetWorkflowTaskCompletedEventId()] {
				markerTasks[attrs.GetWorkflowTaskCompletedEventId()] = true
				a.Markers++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED, enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			// Options changed by an operator; a memo upserted (a pool publishing its spec).
			a.Other++
		}
	}
	return cost
}

// signalWithStart reports whether the signal at i arrived with the run's start.
func signalWithStart(events []*historypb.HistoryEvent, i int) bool {
	return i == 1 && events[0].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
}

// billedUpsert: upserts of only the versioning attribute are exempt.
func billedUpsert(ev *historypb.HistoryEvent) bool {
	fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
	_, versionOnly := fields["TemporalChangeVersion"]
	return !(versionOnly && len(fields) == 1)
}

// historyCost lists the runs a visibility query matches and counts their histories from
// since on, fetching a few histories at a time. visit, if not nil, sees every event, one
// history at a time.
func historyCost(ctx context.Context, c client.Client, query string, since time.Time, visit func(*historypb.HistoryEvent)) (HistoryCost, error) {
	runs, err := listRuns(ctx, c, query)
	if err != nil {
		return HistoryCost{}, err
	}
	var (
		mu    sync.Mutex
		total HistoryCost
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, 8)
	for _, r := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			events, err := fetchHistory(ctx, c, r.id, r.runID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, err)
				return
			}
			total.add(countHistory(events, since))
			if visit != nil {
				for _, ev := range events {
					visit(ev)
				}
			}
		})
	}
	wg.Wait()
	return total, first
}

// listRuns returns every execution (all runs) a visibility query matches.
func listRuns(ctx context.Context, c client.Client, query string) ([]executionRef, error) {
	var out []executionRef
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, NextPageToken: token, PageSize: 1000,
		})
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, executionRef{
				id: e.GetExecution().GetWorkflowId(), runID: e.GetExecution().GetRunId(), started: e.GetStartTime().AsTime(),
			})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// executionRef names one run and says when the server started it.
type executionRef struct {
	id, runID string
	started   time.Time
}

// fetchHistory reads a run's whole history from the server.
func fetchHistory(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Query: query}
}
