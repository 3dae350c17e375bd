package webhook

import (
	"fmt"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// TestEventCarriesTheRunsFacts: the intake hands a pool what a prediction needs of each job
// event (the run's commit, its workflow's and the job's names, the job's start and end), and
// takes GitHub's times only where they mean what they say: a queued job's started_at is its
// created_at, not a start.
func TestEventCarriesTheRunsFacts(t *testing.T) {
	const (
		created   = "2026-11-20T10:00:00Z"
		started   = "2026-11-20T10:00:07Z"
		completed = "2026-11-20T10:04:07Z"
	)
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, tc := range []struct {
		action                   string
		completedAt              string
		wantStarted, wantEndedAt time.Time
	}{
		{workflows.JobQueued, "", time.Time{}, time.Time{}},
		{workflows.JobInProgress, "", at(started), time.Time{}},
		{workflows.JobCompleted, completed, at(started), at(completed)},
	} {
		t.Run(tc.action, func(t *testing.T) {
			startedAt := started
			if tc.action == workflows.JobQueued {
				startedAt = created // as GitHub sends a queued job
			}
			completedField := ""
			if tc.completedAt != "" {
				completedField = fmt.Sprintf(`"completed_at":%q,"conclusion":"success",`, tc.completedAt)
			}
			payload := fmt.Appendf(nil, `{"action":%q,"workflow_job":{"id":901,"run_id":77,"head_sha":"0123abcd",`+
				`"workflow_name":"CI","name":"deploy (eu, web)","status":"x","created_at":%q,"started_at":%q,%s`+
				`"labels":["self-hosted","linux"]},"repository":{"full_name":"acme/app","owner":{"login":"acme","type":"Organization"}}}`,
				tc.action, created, startedAt, completedField)
			je, err := parseWorkflowJob("d-1", payload)
			if err != nil {
				t.Fatal(err)
			}
			ev := je.event
			if ev.RunID != 77 || ev.HeadSHA != "0123abcd" || ev.WorkflowName != "CI" || ev.JobName != "deploy (eu, web)" {
				t.Errorf("run facts: run %d sha %q workflow %q job %q; want 77, 0123abcd, CI, deploy (eu, web)",
					ev.RunID, ev.HeadSHA, ev.WorkflowName, ev.JobName)
			}
			if !ev.StartedAt.Equal(tc.wantStarted) || !ev.CompletedAt.Equal(tc.wantEndedAt) {
				t.Errorf("started %v completed %v, want %v and %v", ev.StartedAt, ev.CompletedAt, tc.wantStarted, tc.wantEndedAt)
			}
		})
	}
}
