package workflows

import (
	"errors"
	"testing"
)

// TestDecideRegistration holds the registration check's table: one row per combination of
// what the cluster and GitHub said.
func TestDecideRegistration(t *testing.T) {
	const (
		online = verdictOnline
		again  = verdictAskAgain
		over   = verdictWorkOver
		never  = verdictNeverOnline
		lost   = verdictClusterLost
	)
	type want struct {
		action     verdictAction
		githubDone bool
	}
	table := map[podView]map[githubView]want{
		podUnreadable:  {githubUnreadable: {again, false}, githubNotFound: {again, false}, githubOffline: {again, false}, githubOnline: {online, false}, githubBusy: {online, false}},
		podClusterLost: {githubUnreadable: {again, false}, githubNotFound: {lost, true}, githubOffline: {lost, false}, githubOnline: {online, false}, githubBusy: {online, false}},
		podNotStarted:  {githubUnreadable: {again, false}, githubNotFound: {never, true}, githubOffline: {never, false}, githubOnline: {online, false}, githubBusy: {online, false}},
		podStarted:     {githubUnreadable: {again, false}, githubNotFound: {over, true}, githubOffline: {never, false}, githubOnline: {online, false}, githubBusy: {online, false}},
		podOver:        {githubUnreadable: {over, false}, githubNotFound: {over, true}, githubOffline: {over, false}, githubOnline: {over, false}, githubBusy: {over, false}},
	}
	for _, pod := range []podView{podUnreadable, podClusterLost, podNotStarted, podStarted, podOver} {
		for _, gh := range []githubView{githubUnreadable, githubNotFound, githubOffline, githubOnline, githubBusy} {
			w := table[pod][gh]
			got := decideRegistration(pod, gh)
			if got.action != w.action || got.githubDone != w.githubDone {
				t.Errorf("pod %d × GitHub %d: got %+v, want action %d githubDone %v", pod, gh, got, w.action, w.githubDone)
			}
			if got.action != verdictOnline && got.reason == "" {
				t.Errorf("pod %d × GitHub %d: no reason given", pod, gh)
			}
		}
	}
}

func TestViewsOfThePodAndGitHub(t *testing.T) {
	for _, tc := range []struct {
		phase    PodPhase
		deleting bool
		read     bool
		want     podView
	}{
		{PodRunning, false, false, podUnreadable}, {PodPending, false, true, podNotStarted}, {"", false, true, podNotStarted},
		{PodRunning, false, true, podStarted}, {PodRunning, true, true, podOver}, {PodSucceeded, false, true, podOver},
		{PodFailed, false, true, podOver}, {PodGone, false, true, podOver},
	} {
		if got := viewOfPod(tc.phase, tc.deleting, tc.read); got != tc.want {
			t.Errorf("viewOfPod(%q, deleting %v, read %v) = %d, want %d", tc.phase, tc.deleting, tc.read, got, tc.want)
		}
	}
	for _, tc := range []struct {
		out  GetRunnerOutput
		err  error
		want githubView
	}{
		{GetRunnerOutput{Found: true, Online: true}, errors.New("502"), githubUnreadable}, {GetRunnerOutput{}, nil, githubNotFound},
		{GetRunnerOutput{Found: true}, nil, githubOffline}, {GetRunnerOutput{Found: true, Online: true}, nil, githubOnline},
		{GetRunnerOutput{Found: true, Online: true, Busy: true}, nil, githubBusy},
	} {
		if got := viewOfGitHub(tc.out, tc.err); got != tc.want {
			t.Errorf("viewOfGitHub(%+v, %v) = %d, want %d", tc.out, tc.err, got, tc.want)
		}
	}
}
