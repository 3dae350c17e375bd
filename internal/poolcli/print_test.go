package poolcli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// The status a person reads shows the warm registrations only for a pool that keeps some.
func TestPrintStatusShowsWarmRegistrations(t *testing.T) {
	st := workflows.PoolStatus{Name: "linux", Warm: []workflows.WarmRegistration{{}, {}}, WarmReady: 1, WarmWanted: 3}
	var out bytes.Buffer
	printStatus(&out, st)
	if want := "warm        2 registration(s) minted ahead, 1 ready, 3 wanted"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	printStatus(&out, workflows.PoolStatus{Name: "cold"})
	if strings.Contains(out.String(), "warm") {
		t.Errorf("a pool without warm registrations shows them:\n%s", out.String())
	}
}

// A pool whose runners wait for room says so, with the quota's own words, and marks them; a
// pool with nothing blocked shows no such line.
func TestPrintStatusShowsRunnersWaitingForRoom(t *testing.T) {
	since := time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC)
	msg := `create pod ci/linux-ab12-7: pods "linux-ab12-7" is forbidden: exceeded quota: runners, requested: pods=1, used: pods=5, limited: pods=5`
	st := workflows.PoolStatus{
		Name:    "linux",
		Blocked: []workflows.PoolBlock{{Reason: workflows.BlockQuota, Runners: 15, Since: since, Message: msg}},
		Runners: []workflows.PoolRunner{{Name: "linux-ab12-7", State: workflows.RunnerPending,
			Blocked: &workflows.RunnerBlock{Reason: workflows.BlockQuota, Message: msg, Since: since}}},
	}
	var out bytes.Buffer
	printStatus(&out, st)
	for _, want := range []string{
		"blocked     15 runner(s) waiting for room (quota) since 2026-11-24T17:00:00Z: " + msg,
		"waiting for room (quota)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printStatus(&out, workflows.PoolStatus{Name: "roomy"})
	if strings.Contains(out.String(), "blocked") || strings.Contains(out.String(), "waiting for room") {
		t.Errorf("a pool with nothing blocked shows a block:\n%s", out.String())
	}
}

func TestBlockedSummary(t *testing.T) {
	if got := blockedSummary(nil); got != "-" {
		t.Errorf("nothing blocked = %q, want -", got)
	}
	if got := blockedSummary([]workflows.PoolBlock{{Reason: workflows.BlockQuota, Runners: 15}}); got != "15 quota" {
		t.Errorf("15 runners waiting for quota = %q", got)
	}
}

// A pool placed on clusters shows its runners per cluster and each runner's cluster; a pool
// that names none shows neither.
func TestPrintStatusShowsRunnersPerCluster(t *testing.T) {
	st := workflows.PoolStatus{
		Name:     "gpu",
		Clusters: []workflows.ClusterRunners{{Cluster: "east", Runners: 1}, {Cluster: "west", Runners: 0}},
		Runners:  []workflows.PoolRunner{{Name: "gpu-ab12-1", Cluster: "east", State: workflows.RunnerIdle}},
	}
	var out bytes.Buffer
	printStatus(&out, st)
	for _, want := range []string{"clusters    east 1, west 0", "on east"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printStatus(&out, workflows.PoolStatus{Name: "plain", Runners: []workflows.PoolRunner{{Name: "plain-ab12-1"}}})
	if strings.Contains(out.String(), "clusters") || strings.Contains(out.String(), " on ") {
		t.Errorf("a pool without clusters shows them:\n%s", out.String())
	}
}

// A scale-set pool's status shows its set, session, last message and GitHub's statistics; a
// pool of another mode shows none of it.
func TestPrintStatusShowsTheScaleSet(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	st := workflows.PoolStatus{Name: "linux", ScaleSet: &workflows.PoolScaleSetState{
		ScaleSetID: 5, Listening: true, SessionID: "s1", MessageAt: at,
		Ledger:     workflows.ScaleSetLedger{LastMessageID: 9, Waiting: []int64{1, 2}},
		Statistics: workflows.ScaleSetStatistics{AssignedJobs: 3, BusyRunners: 1},
	}}
	var out bytes.Buffer
	printStatus(&out, st)
	for _, want := range []string{
		`scale set   id 5, listener running, session "s1", last message 9 at 2026-11-26T09:00:00Z`,
		"2 waiting, 0 running (GitHub: 3 assigned, 0 running; runners 0 registered, 1 busy, 0 idle)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printStatus(&out, workflows.PoolStatus{Name: "webhooks"})
	if strings.Contains(out.String(), "scale set") {
		t.Errorf("a pool without a scale set shows one:\n%s", out.String())
	}
}

// A scale-set pool's status says what an operator must act on: a set that kept only its name
// as its label, a ledger over GitHub's count, and sets left waiting for their runners.
func TestPrintScaleSetSaysWhatNeedsAnOperator(t *testing.T) {
	since := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printScaleSet(&out, &workflows.PoolScaleSetState{
		ScaleSetID: 7, NameOnlyLabels: true, ExcessSince: since,
		Ledger:     workflows.ScaleSetLedger{Waiting: []int64{1, 2, 3}},
		Statistics: workflows.ScaleSetStatistics{AssignedJobs: 1},
		Left:       []workflows.LeftScaleSet{{ScaleSetID: 5, Runners: []string{"r1"}}},
	})
	for _, want := range []string{"kept only its name", "2 jobs over GitHub's assigned count since 2026-11-28T01:00:00Z", "id 5, deleted once its 1 runner(s) have ended"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A prewarming pool shows its predicted runners beside its queued jobs, with the jobs they
// are for; a pool that does not prewarm shows no such line and "-" in the list.
func TestPrintStatusShowsPredictedRunners(t *testing.T) {
	st := workflows.PoolStatus{Name: "linux", Spec: workflows.PoolSpec{Prewarm: &workflows.PrewarmSpec{Enabled: true}},
		Reservations: 2, Predicted: 1, PredictedWhy: "build of acme/app run 77 (due 10:04:30)", PrewarmLead: 21400 * time.Millisecond}
	var out bytes.Buffer
	printStatus(&out, st)
	for _, want := range []string{
		"reserved    2 queued job(s)",
		"predicted   1 runner(s) warmed for jobs not queued yet, started 21s ahead: build of acme/app run 77 (due 10:04:30)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if got := predictedColumn(st); got != "1" {
		t.Errorf("list column %q, want 1", got)
	}
	out.Reset()
	plain := workflows.PoolStatus{Name: "cold"}
	printStatus(&out, plain)
	if strings.Contains(out.String(), "predicted") || predictedColumn(plain) != "-" {
		t.Errorf("a pool that does not prewarm shows predictions (column %q):\n%s", predictedColumn(plain), out.String())
	}
}
