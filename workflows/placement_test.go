package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestPlace(t *testing.T) {
	ab := []string{"a", "b"}
	tests := []struct {
		name   string
		probes []ClusterProbe
		want   string
		ok     bool
	}{
		{"nothing probed yet", nil, "", false},
		{"first answers", []ClusterProbe{{Cluster: "a"}}, "a", true},
		{"first down, second not probed", []ClusterProbe{{Cluster: "a", Error: "timeout"}}, "", false},
		{"first down, second answers", []ClusterProbe{{Cluster: "a", Error: "timeout"}, {Cluster: "b"}}, "b", true},
		{"all down: the first", []ClusterProbe{{Cluster: "a", Error: "timeout"}, {Cluster: "b", Error: "refused"}}, "a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := place(ab, tt.probes)
			if ok != tt.ok || got.Cluster != tt.want {
				t.Fatalf("place = %+v, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
			if ok && got.Why == "" {
				t.Fatal("a placement says why")
			}
		})
	}
}

func TestForCluster(t *testing.T) {
	tests := []struct {
		cluster string
		policy  string
		want    string
	}{
		{"", TaskQueue, TaskQueue},
		{"", GitHubTaskQueue, GitHubTaskQueue},
		{"gpu", TaskQueue, "runnerflow-cluster-gpu"},
		{"gpu", GitHubTaskQueue, "runnerflow-cluster-gpu-github"},
	}
	for _, tt := range tests {
		p := KubernetesActivityPolicy
		p.TaskQueue = tt.policy
		if got := ForCluster(p, tt.cluster).TaskQueue; got != tt.want {
			t.Errorf("ForCluster(%s, %q) = %s, want %s", tt.policy, tt.cluster, got, tt.want)
		}
	}
	if KubernetesActivityPolicy.TaskQueue != TaskQueue || GitHubActivityPolicy.TaskQueue != GitHubTaskQueue {
		t.Fatal("ForCluster changed a shared policy")
	}
}

func TestRunnersByCluster(t *testing.T) {
	if got := runnersByCluster(nil, []PoolRunner{{Name: "x"}}); got != nil {
		t.Fatalf("a pool without clusters reports none, got %+v", got)
	}
	runners := []PoolRunner{{Cluster: "b"}, {Cluster: "a"}, {Cluster: "b"}, {Cluster: "old"}, {}}
	got := runnersByCluster([]string{"a", "b", "c"}, runners)
	want := []ClusterRunners{{"a", 1}, {"b", 2}, {"c", 0}, {"old", 1}, {"", 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}

func TestValidateClusters(t *testing.T) {
	base := poolTestSpec
	tests := []struct {
		name  string
		edit  func(*PoolSpec)
		paths []string
	}{
		{"none", func(*PoolSpec) {}, nil},
		{"ordered list", func(s *PoolSpec) { s.Clusters = []string{"a", "b"} }, nil},
		{"bad name and duplicate", func(s *PoolSpec) { s.Clusters = []string{"A_1", "b", "b", ""} },
			[]string{"pool.clusters[0]", "pool.clusters[2]", "pool.clusters[3]"}},
		{"warm with clusters", func(s *PoolSpec) { s.Clusters = []string{"a"}; s.WarmRegistrations = 1 },
			[]string{"pool.warmRegistrations"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.edit(&s)
			errs := s.WithDefaults().ValidateNew(field.NewPath("pool"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if len(got) != len(tt.paths) {
				t.Fatalf("errors %v, want fields %v", errs, tt.paths)
			}
			for i := range got {
				if got[i] != tt.paths[i] {
					t.Fatalf("errors %v, want fields %v", errs, tt.paths)
				}
			}
		})
	}
}

func TestClusterNotInTemplateHash(t *testing.T) {
	s := poolTestSpec()
	h := s.TemplateHash()
	s.Clusters = []string{"a", "b"}
	if s.TemplateHash() != h {
		t.Fatal("placing a pool on clusters must not roll its runners out")
	}
}

var errProbe = errors.New("probe failed")

// A pool on clusters a, b places its runners on a while a answers, on b while a does not, and
// keeps the runners it placed on a there; its status counts runners per cluster.
func TestPoolPlacesRunnersOnFirstAnsweringCluster(t *testing.T) {
	for _, canAfter := range []int{0, 2} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			var mu sync.Mutex
			aDown := false
			var probed []string
			h.onSegment = func() {
				h.env.RegisterActivityWithOptions(func(_ context.Context, in ProbeClusterInput) (ProbeClusterOutput, error) {
					mu.Lock()
					defer mu.Unlock()
					probed = append(probed, in.Cluster)
					if in.Cluster == "a" && aDown {
						return ProbeClusterOutput{}, errProbe
					}
					return ProbeClusterOutput{Version: "v1.34.0"}, nil
				}, activity.RegisterOptions{Name: ActivityProbeCluster})
			}
			spec := poolTestSpec()
			spec.MinReplicas, spec.Clusters = 2, []string{"a", "b"}
			h.check(time.Minute, "2 runners on a", func(st PoolStatus) bool {
				return len(st.Clusters) == 2 && st.Clusters[0] == (ClusterRunners{"a", 2}) && st.Clusters[1] == (ClusterRunners{"b", 0})
			})
			h.at(2*time.Minute, func() {
				mu.Lock()
				aDown = true
				mu.Unlock()
				h.update("scale", UpdateScale, ScaleRequest{Min: ptr(4)})
			})
			h.check(4*time.Minute, "2 more runners on b, the first 2 still on a", func(st PoolStatus) bool {
				return len(st.Clusters) == 2 && st.Clusters[0] == (ClusterRunners{"a", 2}) && st.Clusters[1] == (ClusterRunners{"b", 2})
			})
			h.run(spec, 5*time.Minute)
			byCluster := map[string]int{}
			for _, in := range h.inputs {
				byCluster[in.Cluster]++
			}
			if byCluster["a"] != 2 || byCluster["b"] != 2 || len(byCluster) != 2 {
				t.Errorf("runner inputs by cluster %v, want a: 2, b: 2", byCluster)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"a", "a", "b"}; !slices.Equal(probed, want) {
				t.Errorf("probed %v, want %v (one probe per batch, in the pool's order)", probed, want)
			}
		})
	}
}

// A pool with no clusters probes nothing and starts runners that name none.
func TestPoolWithoutClustersProbesNothing(t *testing.T) {
	h := newPoolHarness(t, 0)
	h.onSegment = func() {
		h.env.RegisterActivityWithOptions(func(context.Context, ProbeClusterInput) (ProbeClusterOutput, error) {
			t.Error("a pool without clusters probed one")
			return ProbeClusterOutput{}, nil
		}, activity.RegisterOptions{Name: ActivityProbeCluster})
	}
	spec := poolTestSpec()
	spec.MinReplicas = 2
	end := h.run(spec, time.Minute)
	if end.Clusters != nil {
		t.Errorf("status clusters %+v, want none", end.Clusters)
	}
	for _, in := range h.inputs {
		if in.Cluster != "" {
			t.Errorf("runner %s placed on %q", in.Name, in.Cluster)
		}
	}
}

// A runner placed on a named cluster runs its registration on that cluster's paced queue and
// its Kubernetes activities on that cluster's queue; GitHub reads and removals stay on the
// shared GitHub queue. A runner that names no cluster runs where runners always ran.
func TestRunnerRunsOnItsClusterQueues(t *testing.T) {
	for _, tc := range []struct {
		cluster          string
		register, delete string
	}{
		{"", GitHubTaskQueue, TaskQueue},
		{"b", ClusterGitHubTaskQueue("b"), ClusterTaskQueue("b")},
	} {
		t.Run("cluster "+tc.cluster, func(t *testing.T) {
			h := newRunnerHarness(t).withPool()
			queues := map[string]string{}
			var mu sync.Mutex
			h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				mu.Lock()
				defer mu.Unlock()
				queues[info.ActivityType.Name] = info.TaskQueue
			})
			h.env.OnActivity(ActivityRegisterRunner, mock.Anything, mock.MatchedBy(func(in RegisterRunnerInput) bool {
				return in.Cluster == tc.cluster && in.Pod != nil && in.Pod.Cluster == tc.cluster
			})).Return(RegisterRunnerOutput{RunnerID: 7, SecretName: runnerTestName, SecretUID: "secret-uid",
				Pod: &CreateRunnerPodOutput{UID: "uid-1"}}, nil).Once()
			h.env.OnActivity(ActivityDeleteRunnerSecret, mock.Anything,
				SecretRef{Cluster: tc.cluster, Namespace: runnerTestNS, Name: runnerTestName}).Return(Nothing{}, nil).Once()
			h.env.OnActivity(ActivityRemoveRunner, mock.Anything, mock.Anything).Return(RemoveRunnerOutput{Removed: true}, nil).Maybe()
			h.at(time.Second, SignalDrain, DrainRequest{Reason: "test"})
			in := runnerTestInput(true)
			in.Cluster = tc.cluster
			h.mustRun(in)
			mu.Lock()
			defer mu.Unlock()
			if queues[ActivityRegisterRunner] != tc.register || queues[ActivityDeleteRunnerSecret] != tc.delete {
				t.Errorf("activities ran on %v; want registration on %s, Secret deletion on %s", queues, tc.register, tc.delete)
			}
			if q, ok := queues[ActivityRemoveRunner]; ok && q != GitHubTaskQueue {
				t.Errorf("RemoveRunner ran on %s, want the shared %s", q, GitHubTaskQueue)
			}
		})
	}
}
