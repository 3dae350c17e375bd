package main

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

// TestWarmShares: --warm is split as queueBurst spreads the jobs, the first pools taking the
// odd ones, and never beyond the burst, so no pool keeps a runner no job of its own needs.
func TestWarmShares(t *testing.T) {
	for _, c := range []struct {
		name              string
		warm, jobs, pools int
		want              []int
	}{
		{"cold", 0, 100, 2, []int{0, 0}},
		{"the whole burst", 100, 100, 2, []int{50, 50}},
		{"an odd burst", 5, 5, 2, []int{3, 2}},
		{"part of it, odd", 3, 100, 2, []int{2, 1}},
		{"one runner", 1, 4, 2, []int{1, 0}},
		{"above the burst: cut to it", 500, 100, 2, []int{50, 50}},
		{"above an odd burst", 9, 3, 2, []int{2, 1}},
		{"negative reads as cold", -1, 10, 2, []int{0, 0}},
		{"three pools", 7, 10, 3, []int{3, 2, 2}},
	} {
		got := warmShares(c.warm, c.jobs, c.pools)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: warmShares(%d, %d, %d) = %v, want %v", c.name, c.warm, c.jobs, c.pools, got, c.want)
		}
		jobs := make([]int, c.pools)
		for i := range c.jobs {
			jobs[i%c.pools]++
		}
		for i := range got {
			if got[i] > jobs[i] {
				t.Errorf("%s: pool %d keeps %d warm for %d jobs", c.name, i, got[i], jobs[i])
			}
		}
	}
}

// TestReadyRunners: a runner is ready for a job only when it is registered, online and idle
// and its pod runs; each counts for its organization.
func TestReadyRunners(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	runner := func(org, name, status string, busy bool) githubdouble.Runner {
		return githubdouble.Runner{Name: name, Scope: githubdouble.OrgScope(org), Status: status, Busy: busy}
	}
	for _, c := range []struct {
		name    string
		runners []githubdouble.Runner
		pods    []corev1.Pod
		want    map[string]int
	}{
		{"none", nil, nil, map[string]int{}},
		{"idle and running, in two organizations",
			[]githubdouble.Runner{runner("org-a", "a1", "online", false), runner("Org-B", "b1", "online", false), runner("org-a", "a2", "online", false)},
			[]corev1.Pod{pod("a1", corev1.PodRunning, false), pod("b1", corev1.PodRunning, false), pod("a2", corev1.PodRunning, false)},
			map[string]int{"org-a": 2, "org-b": 1}},
		{"busy, offline or unregistered do not count",
			[]githubdouble.Runner{runner("org-a", "busy", "online", true), runner("org-a", "off", "offline", false)},
			[]corev1.Pod{pod("busy", corev1.PodRunning, false), pod("off", corev1.PodRunning, false), pod("unregistered", corev1.PodRunning, false)},
			map[string]int{}},
		{"a pod not running, or going, does not count",
			[]githubdouble.Runner{runner("org-a", "pending", "online", false), runner("org-a", "done", "online", false), runner("org-a", "going", "online", false), runner("org-a", "podless", "online", false)},
			[]corev1.Pod{pod("pending", corev1.PodPending, false), pod("done", corev1.PodSucceeded, false), pod("going", corev1.PodRunning, true)},
			map[string]int{}},
	} {
		if got := readyRunners(c.runners, c.pods); !maps.Equal(got, c.want) {
			t.Errorf("%s: readyRunners = %v, want %v", c.name, got, c.want)
		}
	}
}
