package simulator_test

import (
	"slices"
	"testing"

	"github.com/google/go-github/v92/github"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
)

func TestEphemeralJITRunnerRunsQueuedJobAndSucceeds(t *testing.T) {
	w := newWorld(t)
	job := w.queueJob("self-hosted", "linux")
	phases := w.recordPhases("jit-1")
	w.jitSecretPod("jit-1", []string{"linux"}, nil)

	pod := w.waitPod("jit-1", "Succeeded", phaseIs(corev1.PodSucceeded))
	if got, want := phases(corev1.PodSucceeded), []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded}; !slices.Equal(got, want) {
		t.Errorf("pod went through phases %v, want %v", got, want)
	}
	if pod.Spec.NodeName != simulator.DefaultNodeName {
		t.Errorf("pod bound to %q, want %q", pod.Spec.NodeName, simulator.DefaultNodeName)
	}
	assertContainerExit(t, pod, 0)

	done, ok := w.jobCompleted(job.ID)
	if !ok {
		t.Fatalf("job %d not completed at GitHub: %+v", job.ID, done)
	}
	if done.Conclusion != githubdouble.ConclusionSuccess || done.RunnerName != "jit-1" {
		t.Errorf("job ended %q on runner %q, want success on jit-1", done.Conclusion, done.RunnerName)
	}
	// GitHub removes an ephemeral runner after its job.
	if r, ok := w.runner("jit-1"); ok {
		t.Errorf("ephemeral runner still registered after its job: %+v", r)
	}
	w.waitStats("one pod bound, started and succeeded, one runner online, one job completed", func(st simulator.Stats) bool {
		return st.PodsBound == 1 && st.PodsStarted == 1 && st.RunnersOnline == 1 && st.JobsCompleted == 1 && st.PodsSucceeded == 1
	})
}

func TestPersistentTokenRunnerTakesTwoJobsAndStaysRunning(t *testing.T) {
	w := newWorld(t)
	w.tokenSecretPod("persistent-1", "linux, gpu", false)
	w.waitFor("runner online at GitHub", func() bool { return w.runnerOnline("persistent-1") })
	first, second := w.queueJob("self-hosted", "gpu"), w.queueJob("self-hosted", "linux", "gpu")

	for _, id := range []int64{first.ID, second.ID} {
		w.waitFor("job completed", func() bool { _, ok := w.jobCompleted(id); return ok })
		j, _ := w.gh.Job(id)
		if j.Conclusion != githubdouble.ConclusionSuccess || j.RunnerName != "persistent-1" {
			t.Errorf("job %d ended %q on %q, want success on persistent-1", id, j.Conclusion, j.RunnerName)
		}
	}
	r, ok := w.runner("persistent-1")
	if !ok || r.Ephemeral || r.JIT || r.Status != "online" || !slices.Contains(r.Labels, "gpu") {
		t.Errorf("runner after two jobs: %+v (found %v), want a registered, online, persistent runner labelled gpu", r, ok)
	}
	pod, err := w.client.CoreV1().Pods(w.ns).Get(t.Context(), "persistent-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("persistent runner's pod is %s after its jobs, want Running", pod.Status.Phase)
	}
}

func TestFaultNeverOnlineKeepsPodRunningWithoutRunner(t *testing.T) {
	w := newWorld(t)
	w.sim.SetFault("never-1", simulator.FaultNeverOnline)
	w.jitSecretPod("never-1", []string{"linux"}, nil)
	w.waitPod("never-1", "Running", phaseIs(corev1.PodRunning))

	// Deleting the pod ends its runner goroutine before the pod goes away, so every decision
	// it would take has been taken when the pod is gone.
	if err := w.client.CoreV1().Pods(w.ns).Delete(t.Context(), "never-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitPodGone("never-1")
	if n := w.connectCalls(); n != 0 {
		t.Errorf("runner made %d connect calls, want none", n)
	}
	if r, ok := w.runner("never-1"); !ok || r.Status != "offline" {
		t.Errorf("runner %+v (found %v), want registered and offline", r, ok)
	}
}

func TestFaultCrashMidJobFailsPodAndJob(t *testing.T) {
	w := newWorld(t)
	job := w.queueJob("self-hosted", "linux")
	w.sim.SetFault("crash-1", simulator.FaultCrashMidJob)
	w.jitSecretPod("crash-1", []string{"linux"}, nil)

	pod := w.waitPod("crash-1", "Failed", phaseIs(corev1.PodFailed))
	assertContainerExit(t, pod, 1)
	j, ok := w.jobCompleted(job.ID)
	if !ok || j.Conclusion != githubdouble.ConclusionFailure || j.RunnerName != "crash-1" {
		t.Errorf("job %+v, want completed with failure on crash-1", j)
	}
}

func TestFaultEvictFailsPodWithEvictedAndRunnerGoesOffline(t *testing.T) {
	w := newWorld(t)
	w.jitSecretPod("evict-1", []string{"linux"}, map[string]string{simulator.AnnotationFault: string(simulator.FaultEvict)})

	pod := w.waitPod("evict-1", "Failed", phaseIs(corev1.PodFailed))
	if pod.Status.Reason != "Evicted" {
		t.Errorf("pod reason %q, want Evicted", pod.Status.Reason)
	}
	if !hasCondition(pod, corev1.DisruptionTarget) {
		t.Errorf("evicted pod lacks the DisruptionTarget condition: %+v", pod.Status.Conditions)
	}
	w.waitFor("runner offline", func() bool { r, ok := w.runner("evict-1"); return ok && r.Status == "offline" })
	w.waitStats("one runner online, one pod evicted", func(st simulator.Stats) bool {
		return st.PodsEvicted == 1 && st.PodsFailed == 1 && st.RunnersOnline == 1 && st.JobsStarted == 0
	})
}

func TestDeletedPodIsFinishedAndRunnerGoesOffline(t *testing.T) {
	w := newWorld(t)
	w.tokenSecretPod("deleted-1", "linux", false)
	w.waitFor("runner online at GitHub", func() bool { return w.runnerOnline("deleted-1") })

	if err := w.client.CoreV1().Pods(w.ns).Delete(t.Context(), "deleted-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitPodGone("deleted-1")
	// The runner goes offline before the simulator finishes the delete.
	if w.runnerOnline("deleted-1") {
		t.Error("runner still online after its pod is gone")
	}
	w.waitStats("one delete finished", func(st simulator.Stats) bool { return st.DeletesFinished == 1 })
}

func TestMissingSecretWaitsThenRuns(t *testing.T) {
	w := newWorld(t)
	cfg, _, err := w.api.Actions.CreateOrgJITConfig(t.Context(), org, githubJITRequest("late-1"))
	if err != nil {
		t.Fatal(err)
	}
	w.createPod("late-1", map[string]string{simulator.AnnotationWorkDuration: "100ms"},
		[]corev1.EnvVar{secretEnv(runnerpod.EnvJITConfig, "late-1", runnerpod.SecretKeyJITConfig)})
	w.waitPod("late-1", "waiting for its secret", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	w.createSecret("late-1", runnerpod.SecretKeyJITConfig, cfg.GetEncodedJITConfig())
	w.waitFor("runner online at GitHub", func() bool { return w.runnerOnline("late-1") })
	w.waitPod("late-1", "Running", phaseIs(corev1.PodRunning))
}

func TestPodWithoutCredentialFails(t *testing.T) {
	w := newWorld(t)
	w.createPod("bad-1", nil, []corev1.EnvVar{{Name: runnerpod.EnvRunnerName, Value: "bad-1"}})
	pod := w.waitPod("bad-1", "Failed", phaseIs(corev1.PodFailed))
	assertContainerExit(t, pod, 1)
	if w.connectCalls() != 0 {
		t.Error("a runner without credentials tried to connect")
	}
}

func TestRestartedSimulatorReconnectsPersistentRunner(t *testing.T) {
	w := newWorld(t)
	w.tokenSecretPod("restart-1", "linux", false)
	w.waitFor("runner online at GitHub", func() bool { return w.runnerOnline("restart-1") })

	// Stopping the simulator ends the runner processes it plays: GitHub sees them offline.
	w.stopSim()
	if w.runnerOnline("restart-1") {
		t.Fatal("runner still online after the simulator stopped")
	}
	next := simulator.New(simulator.Config{Client: w.client, Namespaces: []string{w.ns}, GitHub: githubdouble.NewRunnerClient(w.gh.URL())})
	w.startSimulator(next)
	job := w.queueJob("self-hosted", "linux")
	w.waitFor("job completed", func() bool { _, ok := w.jobCompleted(job.ID); return ok })
	if j, _ := w.gh.Job(job.ID); j.RunnerName != "restart-1" || j.Conclusion != githubdouble.ConclusionSuccess {
		t.Errorf("job %+v, want success on restart-1", j)
	}
	// The pod was already bound and Running: the new simulator only reconnects its runner.
	if st := next.Stats(); st.PodsBound != 0 || st.PodsStarted != 0 || st.RunnersOnline != 1 {
		t.Errorf("restarted simulator stats %+v, want no binding, no status change, one runner online", st)
	}
}

func assertContainerExit(t *testing.T, pod *corev1.Pod, code int32) {
	t.Helper()
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v, want one", pod.Status.ContainerStatuses)
	}
	term := pod.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != code {
		t.Errorf("runner container state %+v, want terminated with exit code %d", pod.Status.ContainerStatuses[0].State, code)
	}
}

func hasCondition(pod *corev1.Pod, typ corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func githubJITRequest(name string) github.CreateJITConfigRequest {
	return github.CreateJITConfigRequest{Name: name, RunnerGroupID: 1, Labels: []string{"linux"}}
}
