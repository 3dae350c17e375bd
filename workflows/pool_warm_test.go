package workflows

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// warmSim plays GitHub and the Secrets for the pool's warm registrations: RegisterRunner,
// RemoveRunner and DeleteRunnerSecret as the pool calls them (runners' own registrations happen
// in the runner workflow, which the harness fakes).
type warmSim struct {
	// registered holds the names GitHub knows and no runner has taken: listed offline.
	registered    map[string]bool
	mints         []string
	removals      []string
	secretDeletes []string
	// removedByName counts removals that named no runner id (a failed mint's cleanup).
	removedByName int
	// failMints makes the next n mints fail after GitHub registered the runner; failed lists them.
	failMints int
	failed    []string
	// spentDeletes are the warm namespace's Secrets deleted as spent, one slice per request.
	spentDeletes [][]string
	// inRunnerNamespace makes mints answer as workers before warm namespaces did: no
	// SecretNamespace.
	inRunnerNamespace bool
}

// warmTestNamespace is the harness worker's warm namespace.
const warmTestNamespace = "runnerflow-warm"

func (h *poolHarness) registerRunner(_ context.Context, in RegisterRunnerInput) (RegisterRunnerOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if in.Mode != RegistrationJIT || in.WorkflowID != RunnerWorkflowID(in.Pool, in.Name) || len(in.Labels) == 0 || (!in.Warm && !h.warm.inRunnerNamespace) {
		h.t.Errorf("warm mint %+v: want a warm JIT registration owned by the runner workflow of that name", in)
	}
	h.warm.mints = append(h.warm.mints, in.Name)
	h.warm.registered[in.Name] = true
	if h.warm.failMints > 0 {
		h.warm.failMints--
		h.warm.failed = append(h.warm.failed, in.Name)
		return RegisterRunnerOutput{}, temporal.NewNonRetryableApplicationError("create secret: forbidden", ErrForbidden, nil)
	}
	out := RegisterRunnerOutput{RunnerID: int64(1000 + len(h.warm.mints)), SecretName: in.Name, SecretNamespace: warmTestNamespace}
	if h.warm.inRunnerNamespace {
		out.SecretNamespace = ""
	}
	return out, nil
}

func (h *poolHarness) deleteWarmSecrets(_ context.Context, in DeleteWarmSecretsInput) (Nothing, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if in.Namespace != warmTestNamespace || in.Pool == "" {
		h.t.Errorf("spent warm Secrets removed in %q of pool %q, want %q", in.Namespace, in.Pool, warmTestNamespace)
	}
	h.warm.spentDeletes = append(h.warm.spentDeletes, slices.Clone(in.Names))
	return Nothing{}, nil
}

func (h *poolHarness) removeRunner(_ context.Context, ref RunnerRef) (RemoveRunnerOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warm.removals = append(h.warm.removals, ref.Name)
	if ref.RunnerID == 0 {
		h.warm.removedByName++
	}
	removed := h.warm.registered[ref.Name]
	delete(h.warm.registered, ref.Name)
	return RemoveRunnerOutput{Removed: removed}, nil
}

func (h *poolHarness) deleteSecret(_ context.Context, ref SecretRef) (Nothing, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warm.secretDeletes = append(h.warm.secretDeletes, ref.Name)
	return Nothing{}, nil
}

// warmCounts is a snapshot of the warm simulation.
type warmCounts struct{ mints, removals, secretDeletes, registered int }

func (h *poolHarness) warmCounts() warmCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return warmCounts{len(h.warm.mints), len(h.warm.removals), len(h.warm.secretDeletes), len(h.warm.registered)}
}

// checkWarm runs an assertion on the status and the warm simulation at an offset.
func (h *poolHarness) checkWarm(offset time.Duration, what string, ok func(PoolStatus, warmCounts) bool) {
	h.at(offset, func() {
		st, c := h.status(), h.warmCounts()
		if !ok(st, c) {
			h.t.Errorf("[continue-as-new after %d] at %v: %s; warm %s ready %d wanted %d, sim %+v, runners %s",
				h.canAfter, offset, what, describeWarm(st), st.WarmReady, st.WarmWanted, c, describeRunners(st))
		}
	})
}

func describeWarm(st PoolStatus) string {
	var parts []string
	for _, w := range st.Warm {
		parts = append(parts, w.Name+"@"+w.MintedAt.Format("15:04:05")+"/"+w.Retiring)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// warmScenario: a pool keeps 3 registrations minted ahead. A burst of 5 jobs takes the 3 (their
// runners start with them) and registers 2 the usual way; nothing is minted while runners
// start; the pool refills to 3 once they run. After 20 hours the 3 are refreshed (replacements
// first, then the old ones removed), lowering warmRegistrations removes the surplus, new labels
// replace the registration, a drain removes all, and a resume mints again. The runner listing
// counts them as the pool's, never as orphans.
var warmScenario = poolScenario{
	name: "warm registrations: taken, refilled, refreshed, removed",
	setup: func(h *poolHarness) (PoolSpec, time.Duration) {
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas, spec.WarmRegistrations = 0, ptr(10), 3
		fewer := spec
		fewer.WarmRegistrations = 1
		relabelled := fewer
		relabelled.Labels = []string{"linux", "x64", "gpu"}
		h.checkWarm(time.Minute, "3 warm registrations minted in quiet time", func(st PoolStatus, c warmCounts) bool {
			return st.WarmReady == 3 && len(st.Warm) == 3 && c.mints == 3 && c.registered == 3 && len(st.Runners) == 0
		})
		h.at(2*time.Minute, func() { h.update("burst", UpdateReservations, reserve(JobQueued, 301, 302, 303, 304, 305)) })
		h.checkWarm(2*time.Minute+10*time.Second, "the burst took the 3 and minted nothing while its runners start", func(st PoolStatus, c warmCounts) bool {
			return len(st.Runners) == 5 && st.WarmReady == 0 && len(st.Warm) == 0 && c.mints == 3
		})
		var busy []string
		h.at(2*time.Minute+30*time.Second, func() { busy = h.startJobsWithIDs(301, 302, 303, 304, 305) })
		h.checkWarm(4*time.Minute, "refilled to 3 once the burst's runners run", func(st PoolStatus, c warmCounts) bool {
			return st.WarmReady == 3 && c.mints == 6 && countState(st, RunnerBusy, "") == 5
		})
		h.checkWarm(5*time.Minute, "the listing counts warm registrations as the pool's", func(st PoolStatus, _ warmCounts) bool {
			return st.Listing != nil && st.Listing.Listed == 8 && len(st.Orphans) == 0
		})
		h.at(5*time.Minute+time.Second, func() { h.finishJobs(busy) })
		h.checkWarm(8*time.Minute, "the burst is over, 3 still warm", func(st PoolStatus, c warmCounts) bool {
			return len(st.Runners) == 0 && st.WarmReady == 3 && c.mints == 6 && c.removals == 0
		})
		h.checkWarm(20*time.Hour+10*time.Minute, "refreshed after 20 hours: 3 new, the 3 old removed", func(st PoolStatus, c warmCounts) bool {
			fresh := !slices.ContainsFunc(st.Warm, func(w WarmRegistration) bool { return w.MintedAt.Before(h.start.Add(20 * time.Hour)) })
			return st.WarmReady == 3 && len(st.Warm) == 3 && fresh && c.mints == 9 && c.removals == 3 && c.secretDeletes == 3 && c.registered == 3
		})
		h.at(21*time.Hour, func() { h.update("fewer", UpdateApply, ApplyRequest{Spec: fewer}) })
		h.checkWarm(21*time.Hour+time.Minute, "warmRegistrations 1: the surplus removed", func(st PoolStatus, c warmCounts) bool {
			return st.WarmReady == 1 && len(st.Warm) == 1 && c.removals == 5 && c.secretDeletes == 5 && c.registered == 1
		})
		h.at(21*time.Hour+30*time.Minute, func() { h.update("relabelled", UpdateApply, ApplyRequest{Spec: relabelled}) })
		h.checkWarm(21*time.Hour+31*time.Minute, "new labels: the registration replaced", func(st PoolStatus, c warmCounts) bool {
			return st.WarmReady == 1 && len(st.Warm) == 1 && st.Warm[0].RegistrationHash == relabelled.RegistrationHash() &&
				c.mints == 10 && c.removals == 6 && c.registered == 1
		})
		h.at(22*time.Hour, func() { h.signal(SignalDrain, DrainRequest{Reason: "retire"}) })
		h.checkWarm(22*time.Hour+time.Minute, "draining: every warm registration removed", func(st PoolStatus, c warmCounts) bool {
			return len(st.Warm) == 0 && st.WarmWanted == 0 && c.removals == 7 && c.secretDeletes == 7 && c.registered == 0
		})
		h.at(22*time.Hour+5*time.Minute, func() { h.signal(SignalResume, OperatorRequest{}) })
		return spec, 22*time.Hour + 10*time.Minute
	},
	verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
		if end.WarmReady != 1 || len(h.warm.mints) != 11 {
			t.Errorf("after resume: %d ready, %d minted; want 1 ready, 11 minted", end.WarmReady, len(h.warm.mints))
		}
		if len(h.inputs) != 5 {
			t.Fatalf("%d runners started, want 5", len(h.inputs))
		}
		// 3 of the burst's runners carry the first 3 registrations (no register call of their
		// own); the other 2 register as runners do.
		names := slices.Clone(h.warm.mints)
		for _, in := range h.inputs {
			i := slices.Index(h.warm.mints, in.Name)
			switch {
			case i < 0 && in.Warm != nil:
				t.Errorf("runner %s started with a warm registration %+v nobody minted", in.Name, in.Warm)
			case i < 0:
				names = append(names, in.Name)
			case i >= 3 || in.Warm == nil || in.Warm.SecretName != in.Name || in.Warm.RunnerID != int64(1001+i):
				t.Errorf("runner %s started with %+v, want the warm registration minted %d-th", in.Name, in.Warm, i+1)
			}
		}
		if slices.Sort(names); len(slices.Compact(names)) != 13 {
			t.Errorf("runner names reused: %v", names)
		}
		// The 3 taken registrations' Secrets in the warm namespace go in one request once the
		// burst's runners run; the others are removed one by one with their registrations.
		taken := slices.Sorted(slices.Values(h.warm.mints[:3]))
		if len(h.warm.spentDeletes) != 1 || !slices.Equal(slices.Sorted(slices.Values(h.warm.spentDeletes[0])), taken) {
			t.Errorf("spent warm Secrets removed as %v, want %v in one request", h.warm.spentDeletes, taken)
		}
		for _, in := range h.inputs {
			if in.Warm != nil && in.Warm.SecretNamespace != warmTestNamespace {
				t.Errorf("runner %s started with its warm Secret in %q, want %q", in.Name, in.Warm.SecretNamespace, warmTestNamespace)
			}
		}
	},
}

// Registrations a pool minted before it kept them apart (changeWarmApart at its default
// version: their Secrets in the runner namespace) are retired and minted again apart once the
// pool's next run asks for the warm namespace. Nothing taken from the runner namespace is left
// to remove in bulk.
func TestPoolWarmRegistrationsInTheRunnerNamespaceAreReplaced(t *testing.T) {
	h := newPoolHarness(t, 1)
	h.onSegment = func() {
		if h.segments == 1 {
			h.warm.inRunnerNamespace = true
			h.env.OnGetVersion(changeWarmApart, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			return
		}
		h.warm.inRunnerNamespace = false
	}
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.WarmRegistrations = 0, ptr(10), 2
	h.checkWarm(10*time.Minute, "2 warm registrations, all kept apart", func(st PoolStatus, c warmCounts) bool {
		apart := !slices.ContainsFunc(st.Warm, func(w WarmRegistration) bool { return w.SecretNamespace != warmTestNamespace })
		return st.WarmReady == 2 && len(st.Warm) == 2 && apart && c.registered == 2
	})
	h.run(spec, 11*time.Minute)
	if h.segments < 2 {
		t.Fatal("the pool never continued as new")
	}
	c := h.warmCounts()
	if c.mints != 4 || c.removals != 2 || c.secretDeletes != 2 || len(h.warm.spentDeletes) != 0 {
		t.Errorf("%+v, spent %v: want the 2 minted in the runner namespace removed (and their Secrets) and 2 minted apart", c, h.warm.spentDeletes)
	}
}

// A worker from before warm namespaces (no SecretNamespace in its answer) keeps a pool that
// asks for them from minting in a loop: what it minted counts as kept in the runner namespace.
func TestPoolWarmMintedByAnOldWorkerIsKept(t *testing.T) {
	h := newPoolHarness(t, 0)
	h.warm.inRunnerNamespace = true
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.WarmRegistrations = 0, ptr(10), 2
	h.checkWarm(10*time.Minute, "2 warm registrations kept in the runner namespace", func(st PoolStatus, c warmCounts) bool {
		in := !slices.ContainsFunc(st.Warm, func(w WarmRegistration) bool { return w.SecretNamespace != w.Namespace })
		return st.WarmReady == 2 && in && c.mints == 2 && c.removals == 0
	})
	h.run(spec, 11*time.Minute)
}

// A mint that fails (after GitHub registered the runner) is cleaned up by name, after a pause,
// and replaced.
func TestPoolWarmMintFailureIsCleanedUpAndReplaced(t *testing.T) {
	h := newPoolHarness(t, 0)
	h.warm.failMints = 1
	spec := poolTestSpec()
	spec.MinReplicas, spec.WarmRegistrations = 0, 2
	h.checkWarm(10*time.Second, "the failed mint waits to be removed", func(st PoolStatus, c warmCounts) bool {
		failed := slices.IndexFunc(st.Warm, func(w WarmRegistration) bool { return w.Retiring == WarmMintFailed })
		return st.WarmReady == 1 && len(st.Warm) == 2 && failed >= 0 && c.removals == 0
	})
	end := h.run(spec, 3*time.Minute)
	if end.WarmReady != 2 || len(end.Warm) != 2 || len(h.warm.mints) != 3 {
		t.Errorf("end: %s, %d minted; want 2 ready after 3 mints", describeWarm(end), len(h.warm.mints))
	}
	if h.warm.removedByName != 1 || !slices.Equal(h.warm.secretDeletes, h.warm.failed) {
		t.Errorf("cleanup: %d removed by name, secrets deleted %v; want the failed mint's registration and secret", h.warm.removedByName, h.warm.secretDeletes)
	}
	if len(h.warm.registered) != 2 {
		t.Errorf("GitHub holds %d registrations, want the 2 warm ones", len(h.warm.registered))
	}
}

// A runner that took a warm registration but whose workflow never started (its slot's claims
// failed) gives the registration back to be removed: nothing is left at GitHub or as a Secret.
func TestPoolWarmRegistrationOfARunnerThatNeverStartedIsRemoved(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := statefulTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.WarmRegistrations = 0, ptr(2), 1
	h.checkWarm(time.Minute, "1 warm registration", func(st PoolStatus, c warmCounts) bool { return st.WarmReady == 1 && c.mints == 1 })
	h.at(time.Minute+time.Second, func() {
		h.mu.Lock()
		h.failClaims = true
		h.mu.Unlock()
		h.update("queued", UpdateReservations, reserve(JobQueued, 1))
	})
	// Removal is quiet-time work: it waits until no reservation waits for a runner.
	h.at(time.Minute+10*time.Second, func() { h.update("done", UpdateReservations, reserve(JobCompleted, 1)) })
	h.checkWarm(time.Minute+30*time.Second, "the taken registration removed, a new one minted", func(st PoolStatus, c warmCounts) bool {
		return st.Totals.Failed >= 1 && c.removals == 1 && c.secretDeletes == 1 && st.WarmReady == 1 && c.registered == 1
	})
	h.run(spec, 2*time.Minute)
	if len(h.warm.removals) != 1 || h.warm.removals[0] != h.warm.mints[0] {
		t.Errorf("removed %v, want the taken registration %s", h.warm.removals, h.warm.mints[0])
	}
	if len(h.inputs) != 0 {
		t.Errorf("%d runner workflows started, want none (their claims failed)", len(h.inputs))
	}
}

// Pausing leaves warm registrations alone; a persistent pool keeps none.
func TestPoolWarmPausedTouchesNothing(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.WarmRegistrations = 0, 2
	fewer := spec
	fewer.WarmRegistrations = 0
	h.at(time.Minute, func() { h.signal(SignalPause, OperatorRequest{Reason: "incident"}) })
	h.at(2*time.Minute, func() { h.update("fewer", UpdateApply, ApplyRequest{Spec: fewer}) })
	h.checkWarm(3*time.Minute, "paused: nothing removed", func(st PoolStatus, c warmCounts) bool {
		return st.WarmReady == 2 && c.removals == 0
	})
	h.at(4*time.Minute, func() { h.signal(SignalResume, OperatorRequest{}) })
	end := h.run(spec, 5*time.Minute)
	if len(end.Warm) != 0 || len(h.warm.removals) != 2 {
		t.Errorf("after resume with warmRegistrations 0: %s, %d removed", describeWarm(end), len(h.warm.removals))
	}
}

// statefulTestSpec is poolTestSpec with one claim template mounted by the runner.
func statefulTestSpec() PoolSpec {
	spec := poolTestSpec()
	spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "cache"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	return spec
}

func TestPlanWarm(t *testing.T) {
	now := time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	minted := func(name string, ago time.Duration) WarmRegistration {
		return WarmRegistration{Name: name, RegistrationHash: "h", MintedAt: now.Add(-ago), RunnerID: 1}
	}
	minting := WarmRegistration{Name: "m", RegistrationHash: "h"}
	retiring := minted("r", time.Hour)
	retiring.Retiring = WarmSurplus
	outdated := minted("o", time.Hour)
	outdated.RegistrationHash = "old"
	apart := minted("w", time.Hour)
	apart.SecretNamespace = "warm"
	tests := []struct {
		name    string
		in      WarmInput
		mint    int
		retire  []string
		remove  []string
		wakeSet bool
	}{
		{name: "fill from empty, a batch at a time", in: WarmInput{Want: 3}, mint: 2},
		{name: "nothing while not quiet", in: WarmInput{Want: 3, Quiet: false}, mint: 0},
		{name: "nothing before NotBefore", in: WarmInput{Want: 3, NotBefore: now.Add(time.Minute)}, wakeSet: true},
		{name: "full: wake for the refresh", in: WarmInput{Want: 1, Warm: []WarmRegistration{minted("a", time.Hour)}}, wakeSet: true},
		{name: "a mint in flight counts and takes a slot", in: WarmInput{Want: 3, Warm: []WarmRegistration{minting}, InFlight: []string{"m"}}, mint: 1},
		{name: "surplus: oldest first", in: WarmInput{Want: 1, Warm: []WarmRegistration{minted("a", time.Hour), minted("b", 2*time.Hour), minted("c", 3*time.Minute)}},
			retire: []string{"b", "a"}, remove: []string{"a", "b"}, wakeSet: true},
		{name: "aged kept until a replacement exists", in: WarmInput{Want: 1, Warm: []WarmRegistration{minted("a", 21*time.Hour)}}, mint: 1, wakeSet: true},
		{name: "aged retired once replaced", in: WarmInput{Want: 1, Warm: []WarmRegistration{minted("a", 21*time.Hour), minted("b", time.Minute)}},
			retire: []string{"a"}, remove: []string{"a"}, wakeSet: true},
		{name: "expired retired at once", in: WarmInput{Want: 1, Warm: []WarmRegistration{minted("a", 23*time.Hour)}}, mint: 1, retire: []string{"a"}, remove: []string{"a"}},
		{name: "outdated retired and replaced", in: WarmInput{Want: 1, Warm: []WarmRegistration{outdated}}, mint: 1, retire: []string{"o"}, remove: []string{"o"}},
		{name: "retiring removed unless in flight", in: WarmInput{Want: 0, Warm: []WarmRegistration{retiring, minted("x", time.Hour)}, InFlight: []string{"r"}},
			retire: []string{"x"}, remove: []string{"x"}, wakeSet: true},
		{name: "apart: those in the runner namespace retired and replaced", in: WarmInput{Want: 2, Apart: true, Warm: []WarmRegistration{minted("a", time.Hour), apart}},
			mint: 1, retire: []string{"a"}, remove: []string{"a"}, wakeSet: true},
		{name: "not yet apart: those in the runner namespace kept", in: WarmInput{Want: 2, Warm: []WarmRegistration{minted("a", time.Hour), apart}}, wakeSet: true},
		{name: "draining removes all, a batch at a time", in: WarmInput{Want: 0, Warm: []WarmRegistration{minted("a", 1), minted("b", 2), minted("c", 3)}},
			retire: []string{"c", "b", "a"}, remove: []string{"a", "b"}, wakeSet: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Hash = now, "h"
			if tt.name != "nothing while not quiet" {
				in.Quiet = true
			}
			plan := PlanWarm(in)
			var retired []string
			for _, r := range plan.Retire {
				retired = append(retired, r.Name)
			}
			if plan.Mint != tt.mint || !slices.Equal(retired, tt.retire) || !slices.Equal(plan.Remove, tt.remove) || plan.WakeAt.IsZero() == tt.wakeSet {
				t.Errorf("plan = %+v, want mint %d, retire %v, remove %v, wake set %v", plan, tt.mint, tt.retire, tt.remove, tt.wakeSet)
			}
			if !plan.WakeAt.IsZero() && !plan.WakeAt.After(now) {
				t.Errorf("wake %v is not in the future", plan.WakeAt)
			}
		})
	}
}

func TestWarmRegistrationsValidation(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*PoolSpec)
		want string
	}{
		{"negative", func(s *PoolSpec) { s.WarmRegistrations = -1 }, "spec.warmRegistrations: Invalid value: -1: must be >= 0"},
		{"above max", func(s *PoolSpec) { s.WarmRegistrations = 6 }, "spec.warmRegistrations: Invalid value: 6: must be <= maxReplicas (5)"},
		{"persistent", func(s *PoolSpec) { s.WarmRegistrations, s.Ephemeral = 2, ptr(false) }, "spec.warmRegistrations: Forbidden: only ephemeral pools"},
		{"valid", func(s *PoolSpec) { s.WarmRegistrations = 5 }, ""},
	} {
		spec := poolTestSpec()
		tt.edit(&spec)
		got := spec.Validate(field.NewPath("spec")).ToAggregate()
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("%s: %v", tt.name, got)
		case tt.want != "" && (got == nil || !strings.Contains(got.Error(), tt.want)):
			t.Errorf("%s: got %v, want %q", tt.name, got, tt.want)
		}
	}
}

// The registration hash follows what a registration is made for, not the pod template.
func TestRegistrationHash(t *testing.T) {
	base := poolTestSpec()
	image := poolTestSpec()
	image.Template.Spec.Containers[0].Image = "runner:2"
	image.MaxReplicas, image.WarmRegistrations = ptr(9), 3
	reordered := poolTestSpec()
	reordered.Labels = []string{"x64", "linux"}
	if base.RegistrationHash() != image.RegistrationHash() || base.RegistrationHash() != reordered.RegistrationHash() {
		t.Error("a new image, bounds or label order changed the registration hash")
	}
	for _, edit := range []func(*PoolSpec){
		func(s *PoolSpec) { s.Labels = append(s.Labels, "gpu") },
		func(s *PoolSpec) { s.RunnerGroup = "ci" },
		func(s *PoolSpec) { s.Organization, s.Repository = "", "acme/app" },
		func(s *PoolSpec) { s.Namespace = "other" },
		func(s *PoolSpec) { s.WorkFolder = "/w" },
	} {
		s := poolTestSpec()
		edit(&s)
		if s.RegistrationHash() == base.RegistrationHash() {
			t.Errorf("registration hash unchanged by %+v", s)
		}
	}
}

// A burst's webhooks reach the pool over several scale windows: a pool whose runners for the
// first window are all up looks quiet, but refilling then would put GitHub calls on the hot
// path of the next window's runners. Warm work waits WarmRefillSettle after the last start,
// and after a failed call's back-off, whichever is later.
func TestWarmNotBefore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                  string
		backoff, lastScaleOut time.Time
		want                  time.Time
	}{
		{"never scaled out, no back-off", time.Time{}, time.Time{}, time.Time{}},
		{"scaled out just now", time.Time{}, t0, t0.Add(WarmRefillSettle)},
		{"a longer back-off wins", t0.Add(time.Minute), t0, t0.Add(time.Minute)},
		{"a later scale-out wins", t0, t0.Add(time.Second), t0.Add(time.Second + WarmRefillSettle)},
	} {
		if got := warmNotBefore(tc.backoff, tc.lastScaleOut); !got.Equal(tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
