package webhook

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// An in_progress notice hands the runner the job's queue and start times (for its scale-up latencies)
// and records the job's wait in the pool's job-start histogram, once the runner workflow took
// the notice; a job run by a runner that is not runnerflow's records nothing.
func TestJobStartedRecordsTheJobsWait(t *testing.T) {
	pool := unique("jobstart-")
	runner := workflows.RunnerName(pool, "abcd", 1)
	startIdle(t, workflows.RunnerWorkflowID(pool, runner), workflows.RunnerWorkflowType, temporal.SearchAttributes{})
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h, err := NewHandler(Config{Secret: []byte(testSecret), Temporal: tc, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	started := func(id int, runnerName string) []byte {
		return fmt.Appendf(nil, `{"action":"in_progress","workflow_job":{"id":%d,"run_id":1,"status":"in_progress",`+
			`"created_at":"2026-03-01T12:00:00Z","started_at":"2026-03-01T12:00:07Z","runner_name":%q,"labels":["linux"]},`+
			`"repository":{"full_name":"acme/app","owner":{"login":"acme","type":"Organization"}}}`, id, runnerName)
	}
	if w := serve(h, delivery("workflow_job", "d1", started(41, runner))); w.Code != http.StatusAccepted {
		t.Fatalf("in_progress for a runnerflow runner: %d %s", w.Code, w.Body)
	}
	if w := serve(h, delivery("workflow_job", "d2", started(42, "GitHub Actions 7"))); w.Code != http.StatusOK {
		t.Fatalf("in_progress for a hosted runner: %d %s", w.Code, w.Body)
	}

	got := signals[workflows.JobSignal](t, workflows.RunnerWorkflowID(pool, runner), workflows.SignalJobStarted)
	queued := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if len(got) != 1 || !got[0].QueuedAt.Equal(queued) || !got[0].StartedAt.Equal(queued.Add(7*time.Second)) {
		t.Fatalf("runner got %+v, want one notice queued at %s and started 7s later", got, queued)
	}
	count, err := testutil.GatherAndCount(reg, "runnerflow_job_start_seconds")
	if err != nil || count != 1 {
		t.Fatalf("job start series: %d, %v; want one (the runnerflow pool's)", count, err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "runnerflow_job_start_seconds" {
			continue
		}
		hist := f.Metric[0].GetHistogram()
		if hist.GetSampleCount() != 1 || hist.GetSampleSum() != 7 || f.Metric[0].GetLabel()[0].GetValue() != pool {
			t.Errorf("job start histogram %v, want one 7 s wait in pool %s", f.Metric[0], pool)
		}
	}
}

// A job that starts on a live runner of the pool it was routed to reaches that runner alone (it
// tells its pool); on a runner whose workflow has ended, or another pool's runner, the routed
// pool's window hears it, so the pool ties or ends the job's reservation. Every job's end
// reaches the window.
func TestJobStartOfAPoolsOwnRunnerSkipsTheWindow(t *testing.T) {
	own, other := unique("notice-own-"), unique("notice-other-")
	startPool(t, orgPool(own, "notice-org", "", "linux"))
	startPool(t, orgPool(other, "notice-org", "", "gpu"))
	live := workflows.RunnerName(own, "abcd", 1)
	ended := workflows.RunnerName(own, "abcd", 2)
	foreign := workflows.RunnerName(other, "abcd", 3)
	startIdle(t, workflows.RunnerWorkflowID(own, live), workflows.RunnerWorkflowType, temporal.SearchAttributes{})
	startIdle(t, workflows.RunnerWorkflowID(other, foreign), workflows.RunnerWorkflowType, temporal.SearchAttributes{})
	h := newHandler(t, own, other)
	notice := func(action string, id int, runnerName string) []byte {
		return fmt.Appendf(nil, `{"action":%q,"workflow_job":{"id":%d,"run_id":1,"status":%q,"conclusion":"success",`+
			`"created_at":"2026-03-01T12:00:00Z","started_at":"2026-03-01T12:00:07Z","runner_name":%q,"labels":["linux"]},`+
			`"repository":{"full_name":"notice-org/app","owner":{"login":"notice-org","type":"Organization"}}}`,
			action, id, action, runnerName)
	}
	for i, tc := range []struct {
		action, runner string
		window         bool
	}{
		{workflows.JobInProgress, live, false},
		{workflows.JobCompleted, live, true},
		{workflows.JobInProgress, ended, true},
		{workflows.JobCompleted, ended, true},
		{workflows.JobInProgress, foreign, true},
		{workflows.JobCompleted, foreign, true},
	} {
		id := fmt.Sprintf("notice-%s-%d", own, i)
		if w := serve(h, delivery("workflow_job", id, notice(tc.action, 500+i, tc.runner))); w.Code != http.StatusAccepted {
			t.Fatalf("%s on %s: %d %s", tc.action, tc.runner, w.Code, w.Body)
		}
		reached := false
		for _, ev := range windowEvents(t, own) {
			reached = reached || ev.DeliveryID == id
		}
		if reached != tc.window {
			t.Errorf("%s on %s: reached the routed pool's window = %v, want %v", tc.action, tc.runner, reached, tc.window)
		}
	}
	if got := signals[workflows.JobSignal](t, workflows.RunnerWorkflowID(own, live), workflows.SignalJobCompleted); len(got) != 1 || got[0].JobID != 501 {
		t.Errorf("the live runner got completed notices %+v, want job 501's", got)
	}
	if got := signals[workflows.JobSignal](t, workflows.RunnerWorkflowID(other, foreign), workflows.SignalJobStarted); len(got) != 1 {
		t.Errorf("the other pool's runner got start notices %+v, want one", got)
	}
}

// A job's completed event on a runner of an ephemeral pool (the pool's memo says so) reaches
// the scale window alone: the runner ends with its pod and its final report ends the job's
// reservation. On a persistent pool's runner the runner hears it too (it goes idle).
func TestJobEndOfAnEphemeralRunnerGoesToTheWindowAlone(t *testing.T) {
	eph, pers := unique("notice-eph-"), unique("notice-pers-")
	ephPool := orgPool(eph, "notice-eph-org", "", "linux")
	ephPool.Ephemeral = true
	startPool(t, ephPool)
	startPool(t, orgPool(pers, "notice-pers-org", "", "linux"))
	ephRunner := workflows.RunnerName(eph, "abcd", 1)
	persRunner := workflows.RunnerName(pers, "abcd", 1)
	startIdle(t, workflows.RunnerWorkflowID(eph, ephRunner), workflows.RunnerWorkflowType, temporal.SearchAttributes{})
	startIdle(t, workflows.RunnerWorkflowID(pers, persRunner), workflows.RunnerWorkflowType, temporal.SearchAttributes{})
	h := newHandler(t, eph, pers)
	completed := func(id int, org, runnerName string) []byte {
		return fmt.Appendf(nil, `{"action":"completed","workflow_job":{"id":%d,"run_id":1,"status":"completed","conclusion":"success",`+
			`"created_at":"2026-03-01T12:00:00Z","started_at":"2026-03-01T12:00:07Z","runner_name":%q,"labels":["linux"]},`+
			`"repository":{"full_name":"%s/app","owner":{"login":%q,"type":"Organization"}}}`, id, runnerName, org, org)
	}
	for _, tc := range []struct {
		pool, org, runner string
		runnerHears       bool
	}{
		{eph, "notice-eph-org", ephRunner, false},
		{pers, "notice-pers-org", persRunner, true},
	} {
		id := "done-" + tc.pool
		if w := serve(h, delivery("workflow_job", id, completed(700, tc.org, tc.runner))); w.Code != http.StatusAccepted {
			t.Fatalf("completed on %s: %d %s", tc.runner, w.Code, w.Body)
		}
		reached := false
		for _, ev := range windowEvents(t, tc.pool) {
			reached = reached || ev.DeliveryID == id
		}
		if !reached {
			t.Errorf("completed on %s did not reach its pool's window", tc.runner)
		}
		got := signals[workflows.JobSignal](t, workflows.RunnerWorkflowID(tc.pool, tc.runner), workflows.SignalJobCompleted)
		if heard := len(got) > 0; heard != tc.runnerHears {
			t.Errorf("runner %s heard its job's end: %v, want %v", tc.runner, heard, tc.runnerHears)
		}
	}
}
