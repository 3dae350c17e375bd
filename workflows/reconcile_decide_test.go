package workflows

import (
	"slices"
	"testing"
	"time"
)

func TestReconcileRunnerNameIsStrict(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
		ok         bool
	}{
		{RunnerName("linux-x64", "1a2b", 7), "linux-x64", true},
		{RunnerName("p", Generation("run-id"), 12345), "p", true},
		{"build-fast-1", "", false},    // a generation that is not hexadecimal: someone's own runner
		{"linux-1A2B-7", "", false},    // upper case is not what Generation makes
		{"linux-1a2b-Z", "", false},    // nor is an upper-case sequence
		{"linux-1a2b3-7", "", false},   // five digits
		{"my-laptop", "", false},       // too few parts
		{"linux-x64-1a2b-", "", false}, // no sequence
		{"-1a2b-1", "", false},         // no pool
		{"ci-runner-0abc-zz", "ci-runner", true},
	} {
		pool, ok := reconcileRunnerName(tc.name)
		if pool != tc.pool || ok != tc.ok {
			t.Errorf("reconcileRunnerName(%q) = %q, %t; want %q, %t", tc.name, pool, ok, tc.pool, tc.ok)
		}
	}
}

func TestParseScopeReadsScopeString(t *testing.T) {
	for _, s := range []Scope{{Repository: "acme/app"}, {Organization: "acme"}, {Enterprise: "acme-corp"}} {
		if got, ok := ParseScope(s.String()); !ok || got != s {
			t.Errorf("ParseScope(%q) = %+v, %t", s.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "org:", "team:acme", "acme"} {
		if _, ok := ParseScope(bad); ok {
			t.Errorf("ParseScope(%q) accepted", bad)
		}
	}
}

func TestReconcileScopesAreDistinctAndSorted(t *testing.T) {
	got := ReconcileScopes([]PoolOwnership{
		{Name: "b", Scope: Scope{Organization: "zeta"}},
		{Name: "a", Scope: Scope{Repository: "acme/app"}},
		{Name: "c", Scope: Scope{Organization: "zeta"}},
		{Name: "gone"}, // a closed pool whose scope is not known
	})
	want := []Scope{{Organization: "zeta"}, {Repository: "acme/app"}}
	if !slices.Equal(got, want) {
		t.Errorf("scopes %v, want %v", got, want)
	}
}

func TestInventoryObjectsKeepsRunnerflowNames(t *testing.T) {
	org := Scope{Organization: "acme"}
	live := RunnerName("linux", "1a2b", 1)
	got := InventoryObjects(
		[]ScopeRunners{{Scope: org, Runners: []RunnerListing{{Name: live, ID: 11, Busy: true}, {Name: "laptop-of-bob"}}}},
		[]RunnerObject{
			{Kind: KindPod, Namespace: "ci", Name: live, UID: "u1", Pool: "linux", Runner: live, WorkflowID: "runner/linux/" + live, OwnerSecret: live},
			{Kind: KindSecret, Namespace: "ci", Name: "x", Pool: "linux", Runner: "linux-1a2b-2"}, // no annotation: derived id
			{Kind: KindSecret, Namespace: "ci", Name: "y", Pool: "linux"},                         // no runner label
			{Kind: KindPod, Namespace: "ci", Name: "z", Pool: "linux", Runner: "linux-1a2b-3", Deleting: true},
		})
	if len(got) != 3 {
		t.Fatalf("objects %+v, want the registration, the pod and the Secret", got)
	}
	if r := got[0]; r.Kind != KindRegistration || r.Pool != "linux" || r.RunnerID != 11 || !r.Busy || *r.Scope != org || r.WorkflowID != RunnerWorkflowID("linux", live) {
		t.Errorf("registration %+v", r)
	}
	if p := got[1]; p.Kind != KindPod || p.UID != "u1" || p.OwnerSecret != live {
		t.Errorf("pod %+v", p)
	}
	if s := got[2]; s.WorkflowID != RunnerWorkflowID("linux", "linux-1a2b-2") {
		t.Errorf("a Secret without the annotation belongs to the workflow its labels name, got %q", s.WorkflowID)
	}
}

func TestClassifyObjects(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	org := Scope{Organization: "acme"}
	reg := func(pool, runner string) ReconcileObject {
		return ReconcileObject{Kind: KindRegistration, Pool: pool, Runner: runner, WorkflowID: RunnerWorkflowID(pool, runner), Scope: &org}
	}
	secret := func(pool, runner string, age time.Duration) ReconcileObject {
		return ReconcileObject{Kind: KindSecret, Pool: pool, Runner: runner, WorkflowID: RunnerWorkflowID(pool, runner),
			Namespace: "ci", Name: runner, CreatedAt: now.Add(-age)}
	}
	pools := []PoolOwnership{
		{Name: "live", Running: true, Scope: org, Owned: []string{"live-1a2b-1", "live-1a2b-2"}},
		{Name: "closed", Scope: org},
		{Name: "stuck", Running: true, Scope: org, Unavailable: "query timed out"},
		{Name: "elsewhere", Scope: Scope{Organization: "unlisted"}},
	}
	for _, tc := range []struct {
		name      string
		obj       ReconcileObject
		candidate bool
		reason    string // when skipped; "" and not a candidate: the pool's own
	}{
		{"a running runner's registration", reg("live", "live-1a2b-1"), false, ""},
		{"a warm registration's Secret", secret("live", "live-1a2b-2", time.Hour), false, ""},
		{"a registration of a live pool it does not own", reg("live", "live-1a2b-9"), true, ""},
		{"an old Secret of a live pool it does not own", secret("live", "live-1a2b-9", time.Hour), true, ""},
		{"a young Secret of a live pool it does not own", secret("live", "live-1a2b-9", time.Minute), false, SkipYoung},
		{"a registration of a closed pool", reg("closed", "closed-1a2b-1"), true, ""},
		{"an old Secret of a closed pool", secret("closed", "closed-1a2b-1", 3*time.Minute), true, ""},
		{"a registration of a pool never seen here", reg("other", "other-1a2b-1"), false, SkipUnknownPool},
		{"a Secret of a pool whose status is unavailable", secret("stuck", "stuck-1a2b-1", time.Hour), false, "pool status unavailable: query timed out"},
		{"a Secret of a pool whose scope was not listed", secret("elsewhere", "elsewhere-1a2b-1", time.Hour), false, SkipUnlisted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cands, skipped := ClassifyObjects(ClassifyInput{Objects: []ReconcileObject{tc.obj}, Pools: pools, Listed: []Scope{org}, Now: now, Grace: 2 * time.Minute})
			if (len(cands) == 1) != tc.candidate {
				t.Errorf("candidates %+v, want candidate %t", cands, tc.candidate)
			}
			switch {
			case tc.reason == "" && len(skipped) > 0:
				t.Errorf("skipped %+v, want not skipped", skipped)
			case tc.reason != "" && (len(skipped) != 1 || skipped[0].Reason != tc.reason):
				t.Errorf("skipped %+v, want reason %q", skipped, tc.reason)
			}
		})
	}
}

func TestConfirmOrphans(t *testing.T) {
	org := Scope{Organization: "acme"}
	objs := func(runner string, busy bool) []ReconcileObject {
		id := RunnerWorkflowID("p", runner)
		return []ReconcileObject{
			{Kind: KindRegistration, Pool: "p", Runner: runner, WorkflowID: id, Scope: &org, Busy: busy},
			{Kind: KindSecret, Pool: "p", Runner: runner, WorkflowID: id, Namespace: "ci", Name: runner},
			{Kind: KindPod, Pool: "p", Runner: runner, WorkflowID: id, Namespace: "ci", Name: runner},
		}
	}
	var cands []ReconcileObject
	cands = append(cands, objs("p-1a2b-1", false)...) // ended: all three orphans
	cands = append(cands, objs("p-1a2b-2", true)...)  // ended but busy: nothing
	cands = append(cands, objs("p-1a2b-3", false)...) // still running: nothing, not reported
	ended := []string{RunnerWorkflowID("p", "p-1a2b-1"), RunnerWorkflowID("p", "p-1a2b-2")}
	orphans, skipped := ConfirmOrphans(cands, ended)
	if len(orphans) != 3 || slices.ContainsFunc(orphans, func(o ReconcileObject) bool { return o.Runner != "p-1a2b-1" }) {
		t.Errorf("orphans %+v, want the three objects of p-1a2b-1", orphans)
	}
	var reasons []string
	for _, s := range skipped {
		if s.Runner != "p-1a2b-2" {
			t.Errorf("skipped %+v, a runner whose workflow runs is not reported", s)
		}
		reasons = append(reasons, string(s.Kind)+": "+s.Reason)
	}
	want := []string{"registration: " + SkipBusy, "secret: " + SkipBusyRunner, "pod: " + SkipBusyRunner}
	if !slices.Equal(reasons, want) {
		t.Errorf("skipped %v, want %v", reasons, want)
	}
}

func TestPlanRemoval(t *testing.T) {
	org := Scope{Organization: "acme"}
	orphans := []ReconcileObject{
		{Kind: KindPod, Runner: "p-1a2b-2", WorkflowID: "w2", Namespace: "ci", Name: "p-1a2b-2"},                          // alone
		{Kind: KindPod, Runner: "p-1a2b-1", WorkflowID: "w1", Namespace: "ci", Name: "p-1a2b-1", OwnerSecret: "p-1a2b-1"}, // its Secret goes
		{Kind: KindPod, Runner: "p-1a2b-3", WorkflowID: "w3", Namespace: "ci", Name: "p-1a2b-3", OwnerSecret: "p-1a2b-3"}, // its Secret is not an orphan
		{Kind: KindSecret, Runner: "p-1a2b-1", WorkflowID: "w1", Namespace: "ci", Name: "p-1a2b-1"},
		{Kind: KindRegistration, Runner: "p-1a2b-4", WorkflowID: "w4", Scope: &org},
		{Kind: KindRegistration, Runner: "p-1a2b-1", WorkflowID: "w1", Scope: &org},
	}
	plan := PlanRemoval(orphans)
	names := func(list []ReconcileObject) []string {
		var out []string
		for _, o := range list {
			out = append(out, o.Runner)
		}
		return out
	}
	for _, tc := range []struct {
		what      string
		got, want []string
	}{
		{"registrations", names(plan.Registrations), []string{"p-1a2b-1", "p-1a2b-4"}},
		{"secrets", names(plan.Secrets), []string{"p-1a2b-1"}},
		{"pods", names(plan.Pods), []string{"p-1a2b-2", "p-1a2b-3"}},
		{"pods with their Secret", names(plan.WithSecret), []string{"p-1a2b-1"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	// p-1a2b-1's registration turned out busy: its Secret and pod stay.
	after, skipped := plan.WithoutRunners([]string{"w1"})
	if len(after.Secrets) != 0 || len(after.WithSecret) != 0 || !slices.Equal(names(after.Pods), []string{"p-1a2b-2", "p-1a2b-3"}) {
		t.Errorf("after a busy registration: %+v", after)
	}
	if len(skipped) != 2 || skipped[0].Reason != SkipBusyRunner {
		t.Errorf("skipped %+v, want the Secret and pod of w1", skipped)
	}
}
