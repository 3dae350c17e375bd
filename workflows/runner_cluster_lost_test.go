package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
)

// The sequence of issue 24, case 2: a runner placed on cluster a registered, and a's API
// server stopped answering before the runner connected. Its pod reads fail, GitHub says it is
// offline. Past ClusterLostAfter it leaves: its registration is removed, its pool hears it
// failed (and places another runner elsewhere), and its Secret is deleted once a answers.
func TestRunnerOnALostClusterHandsItsJobBack(t *testing.T) {
	h := newRunnerHarness(t).withPool()
	h.ownedRegistered(7, "uid-1")
	h.env.OnActivity(ActivityGetRunnerPod, mock.Anything, mock.Anything).Return(GetRunnerPodOutput{},
		temporal.NewApplicationError("context deadline exceeded", "Timeout")).Maybe()
	h.env.OnActivity(ActivityGetRunner, mock.Anything, mock.Anything).Return(GetRunnerOutput{Found: true, RunnerID: 7}, nil)
	h.removes(1)
	h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything, SecretRef{Cluster: "a", Namespace: runnerTestNS, Name: runnerTestName}).
		Return(Nothing{}, nil).Once()
	in := runnerTestInput(true)
	in.Cluster = "a"
	_, err := h.run(in)
	if appErrorType(err) != ErrRunnerFailed || !strings.Contains(err.Error(), ClusterLostReason) {
		t.Fatalf("workflow error = %v, want a %s failure naming the lost cluster", err, ErrRunnerFailed)
	}
	if got := h.reportedStates(); !slices.Equal(got, []RunnerState{RunnerFailed}) {
		t.Errorf("reported states = %v, want failed", got)
	}
	if r := h.reports[len(h.reports)-1]; !strings.HasPrefix(r.Reason, ClusterLostReason) {
		t.Errorf("final report reason %q, want it to begin %q", r.Reason, ClusterLostReason)
	}
	calls := h.callOrder()
	removed, deleted := slices.Index(calls, ActivityRemoveRunner), slices.Index(calls, ActivityDeleteRunnerSecret)
	if removed < 0 || deleted < removed {
		t.Errorf("activity calls = %v, want the removal at GitHub before the Secret's deletion", calls)
	}
}

// On the default cluster (the one the workers run beside) an unreadable pod is asked about
// again, as before: there is no other cluster to hand the job to.
func TestClusterLostOnlyForNamedClusters(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		cluster string
		since   time.Time
		want    bool
	}{
		{"a", now.Add(-ClusterLostAfter), true},
		{"a", now.Add(-ClusterLostAfter + time.Second), false},
		{"a", time.Time{}, false},
		{"", now.Add(-time.Hour), false},
	} {
		if got := clusterLost(tc.cluster, tc.since, now); got != tc.want {
			t.Errorf("clusterLost(%q, unread since %s) = %v, want %v", tc.cluster, tc.since, got, tc.want)
		}
	}
}
