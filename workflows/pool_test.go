package workflows

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/workflow"
)

// A pool scenario schedules its steps and checks on the harness and returns the pool's first
// spec and the scenario's length; after the run, verify checks the end.
type poolScenario struct {
	name   string
	setup  func(h *poolHarness) (PoolSpec, time.Duration)
	verify func(t *testing.T, h *poolHarness, end PoolStatus)
}

// check runs a status assertion at an offset.
func (h *poolHarness) check(offset time.Duration, what string, ok func(PoolStatus) bool) {
	h.at(offset, func() {
		st := h.status()
		if !ok(st) {
			h.t.Errorf("[continue-as-new after %d] at %v: %s; status: desired=%d mode=%s runners=%s why=%q",
				h.canAfter, offset, what, st.Desired, st.Mode, describeRunners(st), st.Why)
		}
	})
}

func describeRunners(st PoolStatus) string {
	var parts []string
	for _, r := range st.Runners {
		parts = append(parts, fmt.Sprintf("%s/%s/%s", r.Name, r.TemplateHash[:4], r.State))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

var lifecycleScenario = poolScenario{
	name: "scale up, scale, roll out while busy, scale to zero",
	setup: func(h *poolHarness) (PoolSpec, time.Duration) {
		spec := poolTestSpec()
		spec.MinReplicas = 2
		next := spec
		next.Template = *spec.Template.DeepCopy()
		next.Template.Spec.Containers[0].Image = "runner:2"
		newHash, oldHash := next.TemplateHash(), spec.TemplateHash()
		var busy []string
		h.at(time.Minute, func() { h.addOrphan(RunnerListing{Name: "linux-zzzz-1", ID: 9, Online: true}) })
		h.check(2*time.Minute, "2 idle runners", func(st PoolStatus) bool { return countState(st, RunnerIdle, oldHash) == 2 })
		h.at(3*time.Minute, func() { h.update("scale", UpdateScale, ScaleRequest{Min: ptr(5)}) })
		h.check(5*time.Minute, "5 idle runners", func(st PoolStatus) bool { return countState(st, RunnerIdle, oldHash) == 5 })
		h.at(5*time.Minute+time.Second, func() { busy = h.startJobs(2) })
		h.at(6*time.Minute, func() { h.update("apply", UpdateApply, ApplyRequest{Spec: next}) })
		h.check(8*time.Minute, "2 busy old runners and 3 idle new ones, never more than max", func(st PoolStatus) bool {
			return countState(st, RunnerBusy, oldHash) == 2 && countState(st, RunnerIdle, newHash) == 3 && len(st.Runners) == 5 && st.Outdated == 2
		})
		h.at(10*time.Minute, func() { h.finishJobs(busy) })
		h.check(13*time.Minute, "5 idle runners on the new template", func(st PoolStatus) bool {
			return countState(st, RunnerIdle, newHash) == 5 && len(st.Runners) == 5 && st.Outdated == 0
		})
		h.check(13*time.Minute, "the orphan is reported", func(st PoolStatus) bool {
			return len(st.Orphans) == 1 && st.Orphans[0].Name == "linux-zzzz-1"
		})
		h.at(14*time.Minute, func() { h.update("zero", UpdateScale, ScaleRequest{Min: ptr(0)}) })
		return spec, 20 * time.Minute
	},
	verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
		if len(end.Runners) != 0 || end.Desired != 0 {
			t.Errorf("after scale to zero: %d runners, desired %d", len(end.Runners), end.Desired)
		}
		if end.Totals.Started != 10 || end.Totals.Failed != 0 {
			t.Errorf("totals %+v, want 10 started (2 + 3 + 3 replacements + 2 after the busy jobs), 0 failed", end.Totals)
		}
		if h.stats.jobsCompleted != 2 || h.stats.jobsCancelled != 0 {
			t.Errorf("jobs: %+v, want the 2 busy jobs completed and none cancelled", h.stats)
		}
		apply, ok := h.outcome("apply")
		if !ok || apply.rejected != nil || apply.failed != nil {
			t.Fatalf("apply outcome %+v", apply)
		}
		res, _ := apply.result.(ApplyResult)
		if res.Result != ApplyConfigured || !res.Rollout {
			t.Errorf("apply result %+v, want configured with rollout", res)
		}
	},
}

func reserve(action string, jobs ...int64) ReservationBatch {
	var b ReservationBatch
	for _, j := range jobs {
		b.Events = append(b.Events, WorkflowJobEvent{DeliveryID: fmt.Sprintf("%s-%d", action, j), JobID: j, Action: action, Conclusion: "success"})
	}
	return b
}

var reservationsScenario = poolScenario{
	name: "reservations, scale-down delay, scale from zero, expiry",
	setup: func(h *poolHarness) (PoolSpec, time.Duration) {
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(3), ptr(false)
		spec.ReservationDuration = &metav1.Duration{Duration: 30 * time.Minute}
		var busy []string
		h.check(30*time.Second, "no runners without demand", func(st PoolStatus) bool { return len(st.Runners) == 0 })
		h.at(time.Minute, func() { h.update("queued", UpdateReservations, reserve(JobQueued, 101, 102)) })
		h.at(2*time.Minute, func() { busy = h.startJobs(2) })
		h.at(4*time.Minute, func() {
			h.finishJobs(busy)
			h.update("completed", UpdateReservations, reserve(JobCompleted, 101, 102))
		})
		h.check(8*time.Minute, "idle runners kept within the scale-down delay", func(st PoolStatus) bool {
			return countState(st, RunnerIdle, "") == 2 && st.Desired == 0 && st.Reservations == 0
		})
		h.check(12*time.Minute, "idle runners drained after the delay", func(st PoolStatus) bool { return len(st.Runners) == 0 })
		h.at(13*time.Minute, func() { h.update("queued2", UpdateReservations, reserve(JobQueued, 103)) })
		h.check(14*time.Minute, "scaled from zero on the first reservation", func(st PoolStatus) bool {
			return countState(st, RunnerIdle, "") == 1 && st.Reservations == 1
		})
		h.check(42*time.Minute, "reservation holds capacity until it expires", func(st PoolStatus) bool { return len(st.Runners) == 1 })
		return spec, 50 * time.Minute
	},
	verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
		if len(end.Runners) != 0 || end.Reservations != 0 {
			t.Errorf("after expiry: %d runners, %d reservations", len(end.Runners), end.Reservations)
		}
		if end.Totals.Started != 3 {
			t.Errorf("started %d runners, want 3", end.Totals.Started)
		}
	},
}

// oneRunnerPerJobScenario: ephemeral runners end as soon as their jobs are done, before the
// completed webhooks reach the pool (they come minutes late, out of order). The runner's end
// ends its job's reservation, so no runner is started for a job that is already over; a job
// taken by another pool's runner ends its reservation here too.
var oneRunnerPerJobScenario = poolScenario{
	name: "one runner per job: runners end before their completed events",
	setup: func(h *poolHarness) (PoolSpec, time.Duration) {
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(10), ptr(true)
		var busy []string
		h.at(time.Minute, func() { h.update("queued", UpdateReservations, reserve(JobQueued, 201, 202, 203, 204)) })
		h.check(2*time.Minute, "a runner per queued job", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 4 })
		h.at(2*time.Minute+time.Second, func() { busy = h.startJobsWithIDs(201, 202, 203, 204) })
		h.at(3*time.Minute, func() { h.finishJobs(busy) })
		h.check(3*time.Minute+15*time.Second, "runners leaving after their jobs: their reservations ended, nothing started", func(st PoolStatus) bool {
			return st.Reservations == 0 && countState(st, RunnerDraining, "") == 4 && st.Totals.Started == 4
		})
		h.check(4*time.Minute, "jobs done, runners gone, nothing reserved: no replacement", func(st PoolStatus) bool {
			return len(st.Runners) == 0 && st.Reservations == 0
		})
		h.at(6*time.Minute, func() { h.update("completed", UpdateReservations, reserve(JobCompleted, 204, 202, 201, 203)) })
		h.at(6*time.Minute+time.Second, func() { h.update("queued-late", UpdateReservations, reserve(JobQueued, 203)) })
		// Job 301 is queued here but another pool's runner takes it.
		h.at(7*time.Minute, func() { h.update("queued-301", UpdateReservations, reserve(JobQueued, 301)) })
		h.at(7*time.Minute+time.Second, func() {
			h.update("taken-elsewhere", UpdateReservations, ReservationBatch{Events: []WorkflowJobEvent{
				{DeliveryID: "in-progress-301", JobID: 301, Action: JobInProgress, RunnerName: "other-abcd-1"},
			}})
		})
		h.check(8*time.Minute, "the job served elsewhere holds nothing here", func(st PoolStatus) bool { return st.Reservations == 0 })
		// Job 402 is queued here; the runner started for it takes job 401, which another
		// pool reserved: 402 still needs a runner, and gets one at once.
		var foreign, own []string
		h.at(15*time.Minute, func() { h.update("queued-402", UpdateReservations, reserve(JobQueued, 402)) })
		h.at(16*time.Minute, func() { foreign = h.startJobsWithIDs(401) })
		h.check(17*time.Minute, "a second runner for job 402 while the first runs another pool's job", func(st PoolStatus) bool {
			return countState(st, RunnerBusy, "") == 1 && countState(st, RunnerIdle, "") == 1 && st.Reservations == 1
		})
		h.at(17*time.Minute+time.Second, func() { own = h.startJobsWithIDs(402) })
		h.at(18*time.Minute, func() { h.finishJobs(append(foreign, own...)) })
		// Job 501 runs for 25 minutes, long past its reservation's 10: its runner is still the
		// pool's own job's runner, not one busy elsewhere, so nothing else starts.
		var long []string
		h.at(20*time.Minute, func() { h.update("queued-501", UpdateReservations, reserve(JobQueued, 501)) })
		h.at(21*time.Minute, func() { long = h.startJobsWithIDs(501) })
		// Job 502 comes after 501's reservation expired: the busy runner is not free capacity.
		var short []string
		h.at(32*time.Minute, func() { h.update("queued-502", UpdateReservations, reserve(JobQueued, 502)) })
		h.check(33*time.Minute, "a runner for job 502 beside the long job's", func(st PoolStatus) bool {
			return len(st.Runners) == 2 && countState(st, RunnerIdle, "") == 1 && st.Totals.Started == 8
		})
		h.at(33*time.Minute+time.Second, func() { short = h.startJobsWithIDs(502) })
		h.at(34*time.Minute, func() { h.finishJobs(short) })
		h.check(40*time.Minute, "a long job's runner alone, after its reservation expired", func(st PoolStatus) bool {
			return len(st.Runners) == 1 && countState(st, RunnerBusy, "") == 1 && st.Totals.Started == 8
		})
		h.at(46*time.Minute, func() { h.finishJobs(long) })
		// Job 601's runner never names its job (busy seen some other way); the job's in_progress
		// reaches the window and ties it to the runner, so the runner's end ends it.
		var quiet []string
		h.at(50*time.Minute, func() { h.update("queued-601", UpdateReservations, reserve(JobQueued, 601)) })
		h.at(51*time.Minute, func() { quiet = h.startJobs(1) })
		h.at(51*time.Minute+30*time.Second, func() {
			h.update("in-progress-601", UpdateReservations, ReservationBatch{Events: []WorkflowJobEvent{
				{DeliveryID: "in-progress-601", JobID: 601, Action: JobInProgress, RunnerName: quiet[0]},
			}})
		})
		h.at(52*time.Minute, func() { h.finishJobs(quiet) })
		h.check(53*time.Minute, "the job tied by its in_progress ended with its runner", func(st PoolStatus) bool {
			return len(st.Runners) == 0 && st.Reservations == 0 && st.Totals.Started == 9
		})
		return spec, 60 * time.Minute
	},
	verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
		if len(end.Runners) != 0 || end.Reservations != 0 {
			t.Errorf("end: %s, %d reservations; want none", describeRunners(end), end.Reservations)
		}
		// 4 for the 4 jobs; 1 for job 301 before another pool's runner took it, which then took
		// job 401 (another pool's); 1 for job 402; 1 each for 501, 502 and 601.
		if end.Totals.Started != 9 || h.stats.jobsCompleted != 9 {
			t.Errorf("started %d runners for 9 jobs run here (+1 served elsewhere), %d jobs completed; want 9", end.Totals.Started, h.stats.jobsCompleted)
		}
	},
}

var operatorScenario = poolScenario{
	name: "pause, resume, drain",
	setup: func(h *poolHarness) (PoolSpec, time.Duration) {
		spec := poolTestSpec()
		spec.MinReplicas = 2
		var busy []string
		h.at(2*time.Minute, func() { h.signal(SignalPause, OperatorRequest{Reason: "incident"}) })
		h.at(2*time.Minute+30*time.Second, func() { h.update("scale", UpdateScale, ScaleRequest{Min: ptr(4)}) })
		h.check(4*time.Minute, "paused: nothing started", func(st PoolStatus) bool {
			return len(st.Runners) == 2 && st.Desired == 4 && st.Mode == PoolPaused && st.ModeReason == "incident"
		})
		h.at(5*time.Minute, func() { h.signal(SignalResume, OperatorRequest{}) })
		h.check(6*time.Minute, "resumed: 4 runners", func(st PoolStatus) bool { return countState(st, RunnerIdle, "") == 4 })
		h.at(7*time.Minute, func() { busy = h.startJobs(1) })
		h.at(8*time.Minute, func() { h.signal(SignalDrain, DrainRequest{Reason: "maintenance"}) })
		h.check(10*time.Minute, "draining: only the busy runner is left", func(st PoolStatus) bool {
			return len(st.Runners) == 1 && countState(st, RunnerBusy, "") == 1 && st.Desired == 0 && st.Mode == PoolDraining
		})
		h.at(11*time.Minute, func() { h.finishJobs(busy) })
		h.check(12*time.Minute, "drained: nothing runs", func(st PoolStatus) bool { return len(st.Runners) == 0 })
		h.at(13*time.Minute, func() { h.signal(SignalResume, OperatorRequest{}) })
		return spec, 16 * time.Minute
	},
	verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
		if countState(end, RunnerIdle, "") != 4 || end.Mode != PoolActive {
			t.Errorf("after resume: %s mode %s, want 4 idle, active", describeRunners(end), end.Mode)
		}
		if h.stats.jobsCompleted != 1 || h.stats.jobsCancelled != 0 {
			t.Errorf("jobs %+v, want the busy job completed", h.stats)
		}
	},
}

var statefulScenario = poolScenario{
	name: "stateful slots reuse their claims",
	setup: func(h *poolHarness) (PoolSpec, time.Duration) {
		spec := poolTestSpec()
		spec.MinReplicas, spec.MaxReplicas = 2, ptr(2)
		spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
		spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "cache"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}}
		var busy []string
		h.at(time.Minute, func() { busy = h.startJobs(2) })
		h.at(2*time.Minute, func() { h.finishJobs(busy) })
		h.at(4*time.Minute, func() { busy = h.startJobs(1) })
		h.at(5*time.Minute, func() { h.finishJobs(busy) })
		return spec, 8 * time.Minute
	},
	verify: func(t *testing.T, h *poolHarness, end PoolStatus) {
		if len(h.inputs) != 5 {
			t.Fatalf("%d runners started, want 5 (2 + 2 + 1 replacements)", len(h.inputs))
		}
		for _, in := range h.inputs {
			want := SlotClaimName("linux", "cache", in.Slot)
			if len(in.SlotVolumes) != 1 || in.SlotVolumes[0].ClaimName != want || in.SlotVolumes[0].VolumeName != "cache" {
				t.Errorf("runner %s in slot %d mounts %+v, want claim %s", in.Name, in.Slot, in.SlotVolumes, want)
			}
		}
		if h.claims["linux-cache-0"]+h.claims["linux-cache-1"] != 5 || len(h.claims) != 2 {
			t.Errorf("claims ensured %v, want slots 0 and 1 only, once per runner", h.claims)
		}
		slots := []int{end.Runners[0].Slot, end.Runners[1].Slot}
		slices.Sort(slots)
		if !slices.Equal(slots, []int{0, 1}) {
			t.Errorf("end slots %v", slots)
		}
	},
}

// Every scenario runs once straight through and again with continue-as-new forced at several
// points; the end must be the same.
func TestPoolScenariosAcrossContinueAsNew(t *testing.T) {
	for _, sc := range []poolScenario{lifecycleScenario, reservationsScenario, oneRunnerPerJobScenario, operatorScenario, statefulScenario, warmScenario} {
		t.Run(sc.name, func(t *testing.T) {
			var baseline string
			for _, canAfter := range []int{0, 1, 2, 3, 5, 8, 13} {
				h := newPoolHarness(t, canAfter)
				spec, end := sc.setup(h)
				st := h.run(spec, end)
				sc.verify(t, h, st)
				fp := fingerprint(st, h.stats)
				if canAfter == 0 {
					baseline = fp
					continue
				}
				if h.segments < 2 {
					t.Errorf("continue-as-new after %d: the pool never continued as new", canAfter)
				}
				if fp != baseline {
					t.Errorf("continue-as-new after %d ends differently:\n%s\nstraight through:\n%s", canAfter, fp, baseline)
				}
			}
		})
	}
}

func TestPoolStatefulSlotsNeverShared(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec, end := statefulScenario.setup(h)
	h.at(0, func() {}) // keep the harness started before checks below
	for m := 1; m < 8; m++ {
		h.at(time.Duration(m)*time.Minute+30*time.Second, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			used := map[int]string{}
			for name, r := range h.sim {
				if r.state.Terminal() {
					continue
				}
				if other, ok := used[r.in.Slot]; ok {
					t.Errorf("slot %d held by %s and %s at once", r.in.Slot, other, name)
				}
				used[r.in.Slot] = name
			}
		})
	}
	h.run(spec, end)
}

// A pool keeps its wake-up timer while runner reports come and go: a report (one loop
// iteration) no longer starts and cancels a timer of its own. The same scenario run as the
// previous release ran it (changeLeanRunners at its default version) is the yardstick.
func TestPoolKeepsItsTimerAcrossReports(t *testing.T) {
	timers := func(release workflow.Version) int {
		h := newPoolHarness(t, 0)
		if release == workflow.DefaultVersion {
			h.onSegment = func() {
				h.env.OnGetVersion(changeLeanRunners, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
		}
		spec, end := oneRunnerPerJobScenario.setup(h)
		oneRunnerPerJobScenario.verify(t, h, h.run(spec, end))
		return h.timers
	}
	before, now := timers(workflow.DefaultVersion), timers(1)
	t.Logf("timers: %d as the previous release ran, %d now", before, now)
	if now*3 > before*2 {
		t.Errorf("%d timers, the previous release %d: want at least a third fewer", now, before)
	}
}

// A runner that ends with a job the pool never saw it take (its busy notice did not come: the
// intake tells a pool's own runner, not the pool, when its job starts and ends) still ends
// that job's reservation with its final report: nothing is started for a job already run.
func TestPoolEndsTheJobARunnerReportsEnded(t *testing.T) {
	h := newPoolHarness(t, 0)
	spec := poolTestSpec()
	spec.MinReplicas, spec.MaxReplicas, spec.Ephemeral = 0, ptr(10), ptr(true)
	h.at(time.Minute, func() { h.update("queued", UpdateReservations, reserve(JobQueued, 701)) })
	h.check(2*time.Minute, "a runner for the job", func(st PoolStatus) bool { return len(st.Runners) == 1 && st.Reservations == 1 })
	h.at(2*time.Minute+time.Second, func() {
		h.mu.Lock()
		r := h.sim[h.inputs[0].Name]
		r.state = RunnerDone
		rep := RunnerStateReport{Runner: r.in.Name, State: RunnerDone, TemplateHash: r.in.Spec.TemplateHash, Reason: "pod succeeded", EndedJob: 701}
		h.mu.Unlock()
		h.signal(SignalRunnerState, rep)
	})
	h.check(3*time.Minute, "the job's reservation ended with its runner, nothing started for it", func(st PoolStatus) bool {
		return st.Reservations == 0 && len(st.Runners) == 0 && st.Totals.Started == 1
	})
	h.run(spec, 4*time.Minute)
}
