package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// Two pools with different labels read one repository: it is read once per interval for both
// (not once per pool), each pool is told the jobs its labels fit and only when they changed;
// reads that fail for PullAnswerMaxAge make the answer stale, which each pool is told once.
func TestRepoPullReadsOnceForEveryPool(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(RepoPullWorkflow, workflow.RegisterOptions{Name: RepoPullWorkflowType})
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var mu sync.Mutex
	reads := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in PullJobsInput) (PullJobsResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if activity.GetInfo(ctx).Attempt == 1 {
			reads++
		}
		if !in.AllLabels || len(in.Repos) != 1 {
			t.Errorf("a shared read %+v: want one repository, every job's labels", in)
		}
		if reads > 3 { // GitHub fails from the fourth read on
			return PullJobsResult{}, errors.New("GitHub answers 502")
		}
		return PullJobsResult{Repos: []PulledRepo{{Repository: "acme/app", Runs: []PulledRun{{RunID: 9, Jobs: []PulledJob{
			{ID: 1, Status: JobQueued, Labels: []string{"self-hosted", "linux"}},
			{ID: 2, Status: JobQueued, Labels: []string{"self-hosted", "gpu"}},
		}}}}}, Calls: 3}, nil
	}, activity.RegisterOptions{Name: ActivityPullJobs})
	told := map[string][]RepoPullSignal{}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalRepoPull, mock.Anything).Return(
		func(_ string, id, _, _ string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			told[id] = append(told[id], arg.(RepoPullSignal))
			return nil
		})
	for _, d := range []PullDemand{
		{Pool: "linux", Labels: []string{"linux"}, Interval: time.Minute},
		{Pool: "gpu", Labels: []string{"gpu"}, Interval: time.Minute},
	} {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPullDemand, d) }, time.Second)
	}
	env.RegisterDelayedCallback(func() {
		for _, pool := range []string{"linux", "gpu"} {
			env.SignalWorkflow(SignalPullDemand, PullDemand{Pool: pool})
		}
	}, 3*time.Minute+PullAnswerMaxAge+2*time.Minute)
	env.ExecuteWorkflow(RepoPullWorkflowType, RepoPullInput{Repository: "acme/app"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// Reads at 1 s, then about a minute apart (a failed read retries within PoolPullPolicy)
	// until the pools withdrew at 10 min: one a minute at most, for both pools together.
	if reads < 4 || reads > 11 {
		t.Errorf("%d reads for two pools over 10 minutes at a 1-minute interval; want one a minute", reads)
	}
	for pool, want := range map[string]int64{"linux": 1, "gpu": 2} {
		sigs := told[PoolWorkflowID(pool)]
		if len(sigs) != 2 {
			t.Fatalf("pool %s told %d times (%+v); want its part once, and once that it went stale", pool, len(sigs), sigs)
		}
		if jobs := sigs[0].Repo.Runs[0].Jobs; sigs[0].Stale != "" || len(jobs) != 1 || jobs[0].ID != want || jobs[0].Labels != nil {
			t.Errorf("pool %s first told %+v; want job %d alone, not stale", pool, sigs[0], want)
		}
		if sigs[1].Stale == "" {
			t.Errorf("pool %s then told %+v; want the answer stale", pool, sigs[1])
		}
	}
}

// Each pool is told its part when it changed, when the answer went stale, and when it was last
// told PullShareResendAfter ago; a new label set or a resend makes the next read reach it.
func TestSplitRepoPull(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	answer := PulledRepo{Repository: "acme/app", Runs: []PulledRun{{RunID: 9, Jobs: []PulledJob{
		{ID: 1, Status: JobQueued, Labels: []string{"linux"}}, {ID: 2, Status: JobQueued, Labels: []string{"gpu"}}}}}}
	st := RepoPullState{Repository: "acme/app", Answer: answer, LastOK: now}
	st.Pools = RecordPullDemand(nil, PullDemand{Pool: "linux", Labels: []string{"linux"}, Interval: time.Minute})
	st.Pools = RecordPullDemand(st.Pools, PullDemand{Pool: "gpu", Labels: []string{"gpu"}, Interval: time.Minute})
	first := SplitRepoPull(st, now)
	if len(first) != 2 || first[0].Pool != "gpu" || first[0].Signal.Repo.Runs[0].Jobs[0].ID != 2 {
		t.Fatalf("first split %+v: want both pools told, each its own job", first)
	}
	for i, s := range first {
		st.Pools[i].Sent, st.Pools[i].SentAt = s.Digest, now
	}
	if again := SplitRepoPull(st, now.Add(time.Minute)); len(again) != 0 {
		t.Errorf("an unchanged answer told %+v; want nobody", again)
	}
	if late := SplitRepoPull(st, now.Add(PullShareResendAfter)); len(late) != 2 {
		t.Errorf("after PullShareResendAfter %d pools told; want both again", len(late))
	}
	stale := SplitRepoPull(st, now.Add(PullAnswerMaxAge))
	if len(stale) != 2 || stale[0].Signal.Stale == "" {
		t.Errorf("no read for PullAnswerMaxAge: %+v; want both pools told it is stale", stale)
	}
	st.Pools = RecordPullDemand(st.Pools, PullDemand{Pool: "gpu", Labels: []string{"gpu", "large"}, Interval: time.Minute})
	if relabelled := SplitRepoPull(st, now.Add(time.Minute)); len(relabelled) != 1 || relabelled[0].Pool != "gpu" {
		t.Errorf("after gpu's labels changed %+v; want gpu told again", relabelled)
	}
	if next := NextRepoPull(RepoPullState{LastRead: now, Pools: []RepoPullPool{{PullDemand: PullDemand{Interval: time.Second}}}}); !next.Equal(now.Add(MinPullInterval)) {
		t.Errorf("next read %s; want no sooner than MinPullInterval", next)
	}
	if left := RecordPullDemand(st.Pools, PullDemand{Pool: "gpu"}); len(left) != 1 || left[0].Pool != "linux" {
		t.Errorf("after gpu withdrew %+v; want linux alone", left)
	}
}
