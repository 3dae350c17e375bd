package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sharedReads records the demands a pool sends to the repositories' pull workflows.
type sharedReads struct {
	mu      sync.Mutex
	demands []DemandRepoPullInput
}

func (s *sharedReads) demand(_ context.Context, in DemandRepoPullInput) (DemandRepoPullResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.demands = append(s.demands, in)
	return DemandRepoPullResult{}, nil
}

func (s *sharedReads) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.demands)
}

// part is a repository pull workflow's signal with the given queued jobs, read at at.
func part(at time.Time, stale string, queued ...int64) RepoPullSignal {
	repo := PulledRepo{Repository: "acme/app", Listings: []PulledListing{{Status: JobQueued}}}
	for _, id := range queued {
		repo.Listings[0].RunIDs = append(repo.Listings[0].RunIDs, id+1000)
		repo.Runs = append(repo.Runs, PulledRun{RunID: id + 1000, Jobs: []PulledJob{{ID: id, Status: JobQueued}}})
	}
	return RepoPullSignal{Repo: repo, At: at, Stale: stale}
}

// A pool that shares its reads asks the repository's pull workflow once (no read of its own),
// starts runners for the queued jobs the workflow tells it of, and, when the workflow says its
// answer went stale, no longer counts on it: its desired count falls back to its reservations
// and its status names the stale repository. A repository silent for PullShareSilenceMax is
// asked again (the workflow may be gone) and its answer is not counted on either.
func TestPoolSharesItsPullAndFallsBackOnAStaleAnswer(t *testing.T) {
	reads := &sharedReads{}
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(3), ptr(false)
	spec.ScaleDownDelay = &metav1.Duration{Duration: time.Second}
	spec.Pull = &PullSpec{Metric: PullMetricQueuedJobs, Repositories: []string{"app"}, Interval: &metav1.Duration{Duration: 30 * time.Second}}
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(reads.demand, activity.RegisterOptions{Name: ActivityDemandRepoPull})
		h.env.RegisterActivityWithOptions(func(context.Context, PullJobsInput) (PullJobsResult, error) {
			t.Error("a pool that shares its reads read GitHub itself")
			return PullJobsResult{}, nil
		}, activity.RegisterOptions{Name: ActivityPullJobs})
	}
	h.check(20*time.Second, "one demand, for the repository", func(st PoolStatus) bool {
		return reads.count() == 1 && st.Pull != nil && st.Pull.Shared
	})
	h.at(30*time.Second, func() { h.signal(SignalRepoPull, part(h.env.Now(), "", 1, 2)) })
	h.check(time.Minute, "a runner per job the shared read lists", func(st PoolStatus) bool {
		return st.Desired == 2 && st.Pull.Queued == 2 && len(st.Pull.Stale) == 0
	})
	h.at(time.Minute+time.Second, func() {
		h.update("queued", UpdateReservations, reserve(JobQueued, 1))
		h.signal(SignalRepoPull, part(h.env.Now().Add(-PullAnswerMaxAge), "no read of acme/app succeeded since …", 1, 2))
	})
	h.check(2*time.Minute, "a stale answer is not counted on: the reservations are", func(st PoolStatus) bool {
		return st.Desired == 1 && len(st.Pull.Stale) == 1 && strings.Contains(st.Why, "reservations alone")
	})
	h.at(2*time.Minute+time.Second, func() { h.signal(SignalRepoPull, part(h.env.Now(), "", 3)) })
	h.check(3*time.Minute, "a fresh answer counts again", func(st PoolStatus) bool {
		return st.Desired == 2 && len(st.Pull.Stale) == 0 && reads.count() == 1
	})
	h.check(20*time.Minute, "job 3 still listed, the reservation over: one runner", func(st PoolStatus) bool { return st.Desired == 1 })
	h.check(3*time.Minute+PullShareSilenceMax+time.Minute, "silent for too long: asked again, not counted on", func(st PoolStatus) bool {
		return reads.count() == 2 && len(st.Pull.Stale) == 1 && st.Desired == 0
	})
	h.run(spec, 3*time.Minute+PullShareSilenceMax+2*time.Minute)
}

func TestPullDemandsToSend(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	asked := func(repo string, at time.Time) PullDemanded {
		return PullDemanded{Repository: repo, Interval: time.Minute, Labels: "linux,self-hosted", At: at}
	}
	base := PullDemandsInput{Pool: "p", Labels: []string{"self-hosted", "Linux"}, Repos: []string{"acme/app", "acme/api"}, Interval: time.Minute, Now: now}
	for _, tc := range []struct {
		name string
		with func(*PullDemandsInput)
		want []string // repository:interval:resend
	}{
		{"nothing asked yet: every repository, with a resend", nil, []string{"acme/app:1m0s:true", "acme/api:1m0s:true"}},
		{"asked and heard: nothing", func(in *PullDemandsInput) {
			in.Demanded = []PullDemanded{asked("acme/api", now), asked("acme/app", now)}
		}, nil},
		{"a new interval or labels: asked again", func(in *PullDemandsInput) {
			in.Demanded = []PullDemanded{asked("acme/api", now), asked("acme/app", now)}
			in.Interval, in.Labels = 2*time.Minute, []string{"gpu"}
		}, []string{"acme/app:2m0s:true", "acme/api:2m0s:true"}},
		{"a repository no longer read: withdrawn", func(in *PullDemandsInput) {
			in.Demanded = []PullDemanded{asked("acme/api", now), asked("acme/app", now), asked("acme/old", now)}
		}, []string{"acme/old:0s:false"}},
		{"silent since PullShareSilenceMax: asked again", func(in *PullDemandsInput) {
			in.Demanded = []PullDemanded{asked("acme/api", now.Add(-time.Hour)), asked("acme/app", now.Add(-time.Hour))}
			in.Answers = []PulledRepo{{Repository: "acme/app", Heard: now.Add(-time.Minute)}}
		}, []string{"acme/api:1m0s:true"}},
	} {
		in := base
		if tc.with != nil {
			tc.with(&in)
		}
		var got []string
		for _, d := range PullDemandsToSend(in) {
			got = append(got, fmt.Sprintf("%s:%s:%t", d.Repository, d.Demand.Interval, d.Demand.Resend))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
