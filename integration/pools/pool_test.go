package pools

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

const wait = 2 * time.Minute

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Query: query}
}

func (p *poolTest) scale(minR, maxR *int) {
	p.t.Helper()
	h, err := p.c.UpdateWorkflow(p.ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.PoolWorkflowID(p.name), UpdateName: workflows.UpdateScale,
		Args: []any{workflows.ScaleRequest{Min: minR, Max: maxR}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		p.t.Fatalf("scale: %v", err)
	}
	if err := h.Get(p.ctx, nil); err != nil {
		p.t.Fatalf("scale: %v", err)
	}
}

func ptr(v int) *int { return &v }

// The pool's life in the real world: min 2 → 2 runners online; scale to 5 → 5; a new template
// while 2 runners are busy → every runner ends on the new template and both jobs complete (none
// cancelled); scale to 0 → no pods and no runners at GitHub.
func TestPoolScalesRollsOutAndScalesToZero(t *testing.T) {
	p := newPoolTest(t, "roll")
	spec := p.spec(2, 5, "25s")
	if res := p.apply(spec); res.Result != workflows.ApplyCreated {
		t.Fatalf("apply = %+v, want created", res)
	}
	oldHash := spec.TemplateHash()
	p.eventually(wait, "2 idle runners", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, oldHash) == 2 })
	if online := onlineCount(p.githubRunners()); online != 2 {
		t.Errorf("%d runners online at GitHub, want 2", online)
	}

	p.scale(ptr(5), nil)
	p.eventually(wait, "5 idle runners", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, oldHash) == 5 })

	jobs := p.queueJobs(2)
	p.eventually(wait, "2 busy runners", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerBusy, oldHash) == 2 })
	next := spec
	next.Template = *spec.Template.DeepCopy()
	next.Template.Spec.Containers[0].Image = "ghcr.io/actions/actions-runner:2.321.0"
	next.Template.Annotations = nil
	newHash := next.TemplateHash()
	if res := p.apply(next); res.Result != workflows.ApplyConfigured || !res.Rollout {
		t.Fatalf("apply of the new template = %+v, want configured with rollout", res)
	}
	st := p.eventually(wait, "5 idle runners on the new template", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerIdle, newHash) == 5 && len(st.Runners) == 5
	})
	for _, id := range jobs {
		j, _ := world.GitHub.Job(id)
		if j.Status != githubdouble.StatusCompleted || j.Conclusion != githubdouble.ConclusionSuccess {
			t.Errorf("job %d ended %s/%s on %s, want completed successfully", id, j.Status, j.Conclusion, j.RunnerName)
		}
	}
	for _, pod := range p.pods() {
		if h := pod.Annotations[runnerpod.AnnotationTemplateHash]; h != newHash && pod.DeletionTimestamp == nil {
			t.Errorf("pod %s still runs template %s after the rollout", pod.Name, h)
		}
	}
	if st.Totals.Failed != 0 {
		t.Errorf("%d runners failed", st.Totals.Failed)
	}

	p.scale(ptr(0), nil)
	p.eventually(wait, "no runners", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 })
	waitFor(t, wait, "no runner pods and no runners at GitHub", func() bool {
		return len(p.pods()) == 0 && len(p.githubRunners()) == 0
	})
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-rollout")
	}
}

func onlineCount(runners []githubdouble.Runner) int {
	n := 0
	for _, r := range runners {
		if r.Status == "online" {
			n++
		}
	}
	return n
}

// A stateful pool keeps one claim per slot: the next runner in a slot mounts the claim the
// previous one used, and the claim is made once.
func TestStatefulPoolReusesTheSlotClaim(t *testing.T) {
	p := newPoolTest(t, "state")
	spec := p.spec(1, 1, "1s")
	spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/var/lib/docker"}}
	spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "cache"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	claims := p.watchPodClaims()
	p.apply(spec)
	claim := workflows.SlotClaimName(p.name, "cache", 0)

	var uid string
	for range 2 {
		p.eventually(wait, "an idle runner", func(st workflows.PoolStatus) bool { return count(st, workflows.RunnerIdle, "") == 1 })
		if uid == "" {
			c, err := world.Kubernetes.CoreV1().PersistentVolumeClaims(p.ns).Get(p.ctx, claim, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("slot claim: %v", err)
			}
			uid = string(c.UID)
		}
		ids := p.queueJobs(1)
		waitFor(t, wait, "the job completed", func() bool {
			j, _ := world.GitHub.Job(ids[0])
			return j.Status == githubdouble.StatusCompleted
		})
	}
	p.eventually(wait, "a third runner in the slot", func(st workflows.PoolStatus) bool {
		return st.Totals.Started == 3 && len(st.Runners) == 1 && st.Runners[0].Slot == 0
	})
	waitFor(t, wait, "the third runner's pod", func() bool { return len(claims.podsUsing(claim)) == 3 })
	st := p.status()
	for i, pod := range claims.podsUsing(claim) {
		if want := workflows.RunnerName(p.name, st.Generation, int64(i+1)); pod != want {
			t.Errorf("pod %d that mounted %s is %s, want runner %s", i, claim, pod, want)
		}
	}
	list, err := world.Kubernetes.CoreV1().PersistentVolumeClaims(p.ns).List(p.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != claim || string(list.Items[0].UID) != uid {
		t.Errorf("claims %v, want only %s, made once", list.Items, claim)
	}
}

// podClaims records which pods mounted which claims, from a watch on the namespace.
type podClaims struct {
	mu    sync.Mutex
	users map[string][]string
}

func (p *poolTest) watchPodClaims() *podClaims {
	pc := &podClaims{users: map[string][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	p.t.Cleanup(cancel)
	w, err := world.Kubernetes.CoreV1().Pods(p.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			pc.mu.Lock()
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					pc.users[v.PersistentVolumeClaim.ClaimName] = append(pc.users[v.PersistentVolumeClaim.ClaimName], pod.Name)
				}
			}
			pc.mu.Unlock()
		}
	}()
	return pc
}

func (pc *podClaims) podsUsing(claim string) []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return append([]string(nil), pc.users[claim]...)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
