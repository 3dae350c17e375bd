package workflows

import (
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
)

func TestRecordUnmatchedKeepsTheNewestOnceEach(t *testing.T) {
	var jobs []UnmatchedJob
	for _, id := range []int64{1, 2, 2, 0, 3, 4, 1} {
		jobs = RecordUnmatched(jobs, UnmatchedJob{JobID: id}, 3)
	}
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.JobID)
	}
	// 2 is kept once; 0 is no job; 1 dropped as the oldest of four, then recorded again.
	if want := []int64{3, 4, 1}; !slices.Equal(ids, want) {
		t.Errorf("kept %v, want %v", ids, want)
	}
}

// The workflow keeps what the intake signals, once each, and answers its status query.
func TestUnmatchedJobsWorkflowKeepsWhatItIsTold(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	for i, id := range []int64{5, 6, 5} {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(SignalUnmatchedJob, UnmatchedJob{JobID: id, Labels: []string{"gpu"}, Repository: "acme/app"})
		}, time.Duration(i+1)*time.Second)
	}
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		var st UnmatchedJobsStatus
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		if len(st.Jobs) != 2 || st.Jobs[0].JobID != 5 || st.Jobs[1].JobID != 6 || st.Max != UnmatchedJobsMax {
			t.Errorf("status %+v, want jobs 5 and 6 kept once each", st)
		}
		env.CancelWorkflow()
	}, 10*time.Second)
	env.ExecuteWorkflow(UnmatchedJobsWorkflow, UnmatchedJobsInput{})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not end when cancelled")
	}
}
