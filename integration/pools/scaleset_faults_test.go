package pools

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/hashicorp/go-retryablehttp"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// actionsServiceOutage is how long the Actions service answers 5xx mid-burst: longer than a
// poll's retries and a session's refresh, so the listener has to ride it out.
const actionsServiceOutage = 60 * time.Second

// TestScaleSetPoolRidesOutAnActionsServiceOutage: the Actions service answers 503 to every
// call for a minute mid-burst (polls, acknowledgements, JIT configurations, removals); jobs
// queued before and during it all run, once each, and the pool comes back to zero.
func TestScaleSetPoolRidesOutAnActionsServiceOutage(t *testing.T) {
	p := newPoolTest(t, "ss-outage")
	p.scaleSetPool(10, "5s")
	ids := p.queueJobs(3)
	waitFor(t, wait, "a job started before the outage", func() bool {
		for _, id := range ids {
			if j, ok := world.GitHub.Job(id); ok && j.Status != githubdouble.StatusQueued {
				return true
			}
		}
		return false
	})
	world.GitHub.StartActionsServiceOutage(0)
	ids = append(ids, p.queueJobs(3)...)
	// The outage's length is the fault itself, not a wait for the system under test.
	time.Sleep(actionsServiceOutage)
	world.GitHub.EndActionsServiceOutage()

	p.checkRanOnceEach(p.jobsDone(ids))
	st := p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	t.Logf("%d jobs: %d runners started, %d failed; set %d, session %s, listening %v, error %q",
		len(ids), st.Totals.Started, st.Totals.Failed, st.ScaleSet.ScaleSetID, st.ScaleSet.SessionID, st.ScaleSet.Listening, st.ScaleSet.Error)
	if st.Totals.Started < int64(len(ids)) || st.Totals.Started > int64(len(ids))+1 {
		t.Errorf("started %d runners for %d jobs, want one per job", st.Totals.Started, len(ids))
	}
	if !st.ScaleSet.Listening || st.ScaleSet.Recreated != 0 {
		t.Errorf("set state %+v: want the same set listened to after the outage", *st.ScaleSet)
	}
}

// TestScaleSetListenerWaitsOutAnotherListenersSession: another listener (a client of the
// official library) holds the set's message session when the pool comes up. runnerflow's
// listener waits (its session open retried at the policy's pace, the wait visible as the
// pending activity's attempts and SessionConflict), neither ends nor crash-loops, and once the
// other session is closed it opens its own and the jobs queued meanwhile run once each.
func TestScaleSetListenerWaitsOutAnotherListenersSession(t *testing.T) {
	p := newPoolTest(t, "ss-held")
	quiet := retryablehttp.NewClient()
	quiet.Logger = nil
	other, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL: world.GitHub.URL() + p.org, PersonalAccessToken: world.GitHubToken,
		SystemInfo: scaleset.SystemInfo{System: "runnerflow-test", Subsystem: "other-listener"},
	}, scaleset.WithRetryableHTTPClint(quiet))
	if err != nil {
		t.Fatal(err)
	}
	set, err := other.CreateRunnerScaleSet(t.Context(), &scaleset.RunnerScaleSet{
		Name: p.name, RunnerGroupID: 1, Labels: []scaleset.Label{{Name: "self-hosted"}, {Name: "linux"}},
	})
	if err != nil {
		t.Fatalf("create the set: %v", err)
	}
	held, err := other.MessageSessionClient(t.Context(), set.ID, "other-listener")
	if err != nil {
		t.Fatalf("open the other session: %v", err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			_ = held.Close(context.Background())
		}
	})

	spec := p.spec(0, 5, "2s")
	spec.ScaleSet = &workflows.ScaleSetSpec{}
	p.apply(spec.WithDefaults())
	st := p.eventually(wait, "the set adopted and its listener started", func(st workflows.PoolStatus) bool {
		return st.ScaleSet != nil && st.ScaleSet.ScaleSetID == int64(set.ID) && st.ScaleSet.Listening
	})
	listener := workflows.ScaleSetListenerWorkflowID(p.name, int64(set.ID))
	waitFor(t, wait, "the listener's session open retried on the conflict", func() bool {
		a := pendingActivity(p, listener, workflows.ActivityOpenScaleSetSession)
		return a != nil && a.GetAttempt() >= 3 && strings.Contains(a.GetLastFailure().GetMessage()+a.GetLastFailure().GetApplicationFailureInfo().GetType(), workflows.ErrSessionConflict)
	})
	ids := p.queueJobs(2)
	if s := sessionOwner(int64(set.ID)); s != "other-listener" {
		t.Fatalf("session owner %q while the other listener holds it", s)
	}
	if st := p.status(); !st.ScaleSet.Listening || st.ScaleSet.Error != "" || st.ScaleSet.SessionID != "" {
		t.Errorf("set state %+v while waiting: want the listener running, no error, no session of its own", *st.ScaleSet)
	}

	if err := held.Close(t.Context()); err != nil {
		t.Fatalf("close the other session: %v", err)
	}
	released = true
	p.checkRanOnceEach(p.jobsDone(ids))
	st = p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	if owner := sessionOwner(int64(set.ID)); owner != listener || st.ScaleSet.Recreated != 0 {
		t.Errorf("session owner %q, set created again %d time(s): want the listener %s on the same set", owner, st.ScaleSet.Recreated, listener)
	}
	if runs := listenerRuns(p, listener); runs != 1 {
		t.Errorf("%d runs of the listener, want 1 (no restart while it waited)", runs)
	}
}

// TestScaleSetBusyRunnerIsNeverRemoved: while two runners of a scale-set pool run jobs, the
// pool is scaled down to none and rolled to a new template; the busy runners are removed
// only after their jobs, which succeed (the double fails a job whose runner goes away).
func TestScaleSetBusyRunnerIsNeverRemoved(t *testing.T) {
	p := newPoolTest(t, "ss-busy")
	p.scaleSetPool(4, "20s")
	ids := p.queueJobs(2)
	p.eventually(wait, "2 busy runners", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerBusy, "") == 2 })

	zero := 0
	p.scale(nil, &zero)
	spec := p.spec(0, 0, "20s")
	spec.ScaleSet = &workflows.ScaleSetSpec{}
	spec.Template.Spec.Containers[0].Image = "ghcr.io/actions/actions-runner:2.321.0"
	p.apply(spec.WithDefaults())

	jobs := p.jobsDone(ids)
	for _, j := range jobs {
		if j.Conclusion != githubdouble.ConclusionSuccess {
			t.Errorf("job %d ended %s on %s: its busy runner was removed under it", j.ID, j.Conclusion, j.RunnerName)
		}
	}
	p.checkRanOnceEach(jobs)
	st := p.eventually(wait, "no runners", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 })
	if st.Totals.Failed != 0 {
		t.Errorf("%d runners failed", st.Totals.Failed)
	}
	waitFor(t, wait, "no runner pods", func() bool { return len(p.pods()) == 0 })
}

// pendingActivity returns the workflow's pending activity of that type, nil when none.
func pendingActivity(p *poolTest, id, activityType string) *workflowpb.PendingActivityInfo {
	p.t.Helper()
	d, err := p.c.DescribeWorkflowExecution(p.ctx, id, "")
	if err != nil {
		return nil
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == activityType {
			return a
		}
	}
	return nil
}

// sessionOwner is the owner of the set's message session at the double, "" when none.
func sessionOwner(id int64) string {
	for _, s := range world.GitHub.ScaleSets() {
		if s.ID == id {
			return s.SessionOwner
		}
	}
	return ""
}

// listenerRuns counts the listener's runs (a continue-as-new is a run too; none happen here).
func listenerRuns(p *poolTest, id string) int {
	p.t.Helper()
	resp, err := p.c.ListWorkflow(p.ctx, listRequest(fmt.Sprintf("WorkflowId = %q", id)))
	if err != nil {
		p.t.Fatal(err)
	}
	return len(resp.GetExecutions())
}
