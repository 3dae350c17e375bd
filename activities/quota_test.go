package activities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/workflows"
)

// blockReports records the SignalRunnerBlocked reports sent to pools.
type blockReports struct {
	mu   sync.Mutex
	sent []sentBlockReport
}

type sentBlockReport struct {
	workflowID string
	report     workflows.RunnerBlockReport
}

func (b *blockReports) SignalWorkflow(_ context.Context, workflowID, runID, name string, arg any) error {
	if name != workflows.SignalRunnerBlocked || runID != "" {
		return errors.New("unexpected signal " + name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = append(b.sent, sentBlockReport{workflowID, arg.(workflows.RunnerBlockReport)})
	return nil
}

func (b *blockReports) all() []sentBlockReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sentBlockReport(nil), b.sent...)
}

// setQuota gives the namespace a ResourceQuota "runners" with these limits, its status written
// as the quota controller would (the test's API server runs none); usage counts from zero.
func (e *env) setQuota(hard corev1.ResourceList) {
	e.t.Helper()
	quotas := e.kube.CoreV1().ResourceQuotas(e.ns)
	q, err := quotas.Get(e.ctx, "runners", metav1.GetOptions{})
	if err != nil {
		q, err = quotas.Create(e.ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "runners"},
			Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
	} else {
		q.Spec.Hard = hard
		q, err = quotas.Update(e.ctx, q, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
	q.Status.Hard = hard
	if q.Status.Used == nil {
		q.Status.Used = corev1.ResourceList{}
		for name := range hard {
			q.Status.Used[name] = resource.MustParse("0")
		}
	}
	if _, err := quotas.UpdateStatus(e.ctx, q, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func pods(n string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourcePods: resource.MustParse(n)}
}

// A registration whose pod the namespace has no room for keeps its registration and hands the pod
// to the workflow (no Pod in its result), rather than retrying on the paced GitHub queue. The
// workflow's CreateRunnerPod is then refused with a retryable QuotaExceeded, tells the pool, and
// creates the pod owned by the Secret once the quota has room. One JIT configuration in all.
func TestRegisterRunnerLeavesAPodWithNoRoomToTheWorkflow(t *testing.T) {
	e := newEnv(t)
	reports := &blockReports{}
	e.k8s.Temporal = reports
	e.setQuota(pods("0"))
	in := e.registration("pool-a-ab12-9")
	podIn := e.podInput(in.Name)
	podIn.SecretName, podIn.SecretUID = "", ""
	in.Pod = &podIn

	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil || out.Pod != nil || out.RunnerID == 0 || out.SecretUID == "" {
		t.Fatalf("register = %+v, %v; want the registration without a pod", out, err)
	}
	raw, _ := json.Marshal(out)
	e.mustNotLeak("the activity result", string(raw))

	// What the workflow does with a result that has no Pod.
	podIn.SecretName, podIn.SecretUID = out.SecretName, out.SecretUID
	_, err = e.k8s.CreateRunnerPod(e.ctx, podIn)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrQuotaExceeded || app.NonRetryable() ||
		app.NextRetryDelay() != workflows.QuotaRetryInitial || app.Category() != temporal.ApplicationErrorCategoryBenign {
		t.Fatalf("create pod with no room = %v, want a benign, retryable QuotaExceeded", err)
	}
	e.mustNotLeak("the refusal", err.Error())
	sent := reports.all()
	if len(sent) != 1 || sent[0].workflowID != workflows.PoolWorkflowID("pool-a") ||
		sent[0].report.Runner != in.Name || !sent[0].report.Blocked || sent[0].report.Reason != workflows.BlockQuota {
		t.Fatalf("reports = %+v, want the pool told that %s waits for quota", sent, in.Name)
	}
	e.mustNotLeak("the report", sent[0].report.Message)

	e.setQuota(pods("1"))
	var created workflows.CreateRunnerPodOutput
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		// The API server's quota admission reads quotas from its informer: the raise shows soon.
		if created, err = e.k8s.CreateRunnerPod(e.ctx, podIn); err == nil || errType(err) != workflows.ErrQuotaExceeded || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("create pod with room = %v", err)
	}
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil || string(pod.UID) != created.UID || len(pod.OwnerReferences) != 1 || string(pod.OwnerReferences[0].UID) != out.SecretUID {
		t.Fatalf("pod %+v, %v; want it owned by the registration's Secret", pod.OwnerReferences, err)
	}
	if n := e.gh.CallCount(jitRoute); n != 1 {
		t.Errorf("generate-jitconfig called %d times, want 1", n)
	}
}

// The wait is paced and reported by attempt: the first refusal and attempts 2, 4, 8... tell the
// pool; a later attempt that gets the pod tells it the wait is over; a pod made at the first
// attempt, or a refusal that is not the quota's, tells it nothing.
func TestCreateRunnerPodReportsTheWaitByAttempt(t *testing.T) {
	reports := &blockReports{}
	a := &KubernetesActivities{Temporal: reports}
	in := workflows.CreateRunnerPodInput{Pool: "pool-a", Name: "pool-a-ab12-3"}
	refused := classifyKubernetesError("create pod ci/pool-a-ab12-3", quotaForbidden())
	for attempt := 1; attempt <= 5; attempt++ {
		err := a.settleWait(context.Background(), in, attempt, refused)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != workflows.ErrQuotaExceeded || app.NextRetryDelay() != workflows.QuotaRetryDelay(attempt) {
			t.Fatalf("attempt %d: %v, want QuotaExceeded retried after %s", attempt, err, workflows.QuotaRetryDelay(attempt))
		}
	}
	if err := a.settleWait(context.Background(), in, 6, nil); err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, s := range reports.all() {
		got = append(got, s.report.Blocked)
	}
	if want := []bool{true, true, true, false}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("reports (blocked?) = %v, want %v: attempts 1, 2 and 4 blocked, then the pod admitted", got, want)
	}

	quiet := &blockReports{}
	a.Temporal = quiet
	_ = a.settleWait(context.Background(), in, 1, nil)
	_ = a.settleWait(context.Background(), in, 1, classifyKubernetesError("create pod", errors.New("connection refused")))
	if n := len(quiet.all()); n != 0 {
		t.Errorf("%d reports for a pod made at once and a transient error, want none", n)
	}
}

// A retried registration with no Secret yet asks the API server (a dry run) whether the Secret
// would be admitted before minting, so a namespace whose quota counts Secrets costs no
// credential per try; the first attempt, and one that has its Secret, ask nothing.
func TestRegistrationRetryChecksRoomForItsSecretBeforeMinting(t *testing.T) {
	e := newEnv(t)
	e.setQuota(corev1.ResourceList{"count/secrets": resource.MustParse("0")})
	in := e.registration("pool-a-ab12-4")
	if err := e.gha.secretHasRoom(e.ctx, in, nil, 1); err != nil {
		t.Errorf("first attempt: %v, want no check", err)
	}
	err := e.gha.secretHasRoom(e.ctx, in, nil, 2)
	for deadline := time.Now().Add(20 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond) // the quota admission's informer sees a new quota soon, not at once
		err = e.gha.secretHasRoom(e.ctx, in, nil, 2)
	}
	if errType(err) != workflows.ErrQuotaExceeded {
		t.Fatalf("retry with no room = %v, want QuotaExceeded", err)
	}
	if _, err := e.gha.RegisterRunner(e.ctx, in); errType(err) != workflows.ErrQuotaExceeded {
		t.Fatalf("register with no room for the Secret = %v, want QuotaExceeded", err)
	}
	e.setQuota(corev1.ResourceList{"count/secrets": resource.MustParse("5")})
	err = e.gha.secretHasRoom(e.ctx, in, nil, 2)
	for deadline := time.Now().Add(20 * time.Second); errType(err) == workflows.ErrQuotaExceeded && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond) // the quota admission's informer sees the raise soon
		err = e.gha.secretHasRoom(e.ctx, in, nil, 2)
	}
	if err != nil {
		t.Errorf("retry with room = %v", err)
	}
	if list, _ := e.kube.CoreV1().Secrets(e.ns).List(e.ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("the checks left %d Secret(s); a dry run creates nothing", len(list.Items))
	}
}

func quotaForbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "pool-a-ab12-3",
		errors.New("exceeded quota: runners, requested: pods=1, used: pods=5, limited: pods=5"))
}

// A worker the cluster's RBAC does not allow to create pods fails at once, with the API server's
// own words and what to fix; it does not wait as for a quota.
func TestCreateRunnerPodFailsFastWithoutPermission(t *testing.T) {
	e := newEnv(t)
	cfg := rest.CopyConfig(testKube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "runnerflow-without-rights"}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reports := &blockReports{}
	a := &KubernetesActivities{Client: client, Temporal: reports}
	_, err = a.CreateRunnerPod(e.ctx, e.podInput("pool-a-ab12-5"))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrForbidden || !app.NonRetryable() {
		t.Fatalf("create pod without permission = %v, want a non-retryable Forbidden", err)
	}
	for _, want := range []string{`cannot create resource "pods"`, "lacks this permission"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := len(reports.all()); n != 0 {
		t.Errorf("%d block reports for an RBAC denial, want none", n)
	}
}
