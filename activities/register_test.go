package activities

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const jitRoute = "POST /orgs/{org}/actions/runners/generate-jitconfig"

func TestRegisterRunnerJITWritesTheCredentialOnlyToTheSecret(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-1")
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.RunnerID == 0 || out.SecretName != in.Name || out.Adopted {
		t.Fatalf("output = %+v", out)
	}
	raw, _ := json.Marshal(out)
	e.mustNotLeak("the activity result", string(raw))

	secret, err := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jit := string(secret.Data[runnerpod.SecretKeyJITConfig])
	if !contains(e.gh.IssuedSecrets(), jit) {
		t.Error("the secret does not hold the JIT configuration GitHub issued")
	}
	if secret.Annotations[runnerpod.AnnotationWorkflowID] != in.WorkflowID ||
		secret.Annotations[runnerpod.AnnotationRunnerID] != strconv.FormatInt(out.RunnerID, 10) ||
		secret.Labels[runnerpod.LabelManagedBy] != runnerpod.ManagedByValue || secret.Labels[runnerpod.LabelRunner] != in.Name {
		t.Errorf("secret metadata: labels %v annotations %v", secret.Labels, secret.Annotations)
	}

	// A retry (the worker died before reporting) adopts instead of minting a second runner.
	again, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil || !again.Adopted || again.RunnerID != out.RunnerID {
		t.Fatalf("retry = %+v, %v; want the first registration adopted", again, err)
	}
	if n := e.gh.CallCount(jitRoute); n != 1 {
		t.Errorf("generate-jitconfig called %d times, want 1", n)
	}
}

func TestRegisterRunnerRemovesItsOwnLeftoverAfterANameClash(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-2")
	// An earlier attempt minted a configuration and died before writing the secret.
	leftover, err := e.api.CreateJITConfig(e.ctx, acme, JITRequest{Name: in.Name, RunnerGroupID: 1, Labels: in.Labels})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.gha.RegisterRunner(e.ctx, in)
	if errType(err) != workflows.ErrTransient || !strings.Contains(err.Error(), "removed offline registration") {
		t.Fatalf("first try = %v, want a retryable error after removing the leftover", err)
	}
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	runners := e.gh.Runners()
	if len(runners) != 1 || runners[0].ID != out.RunnerID || runners[0].ID == leftover.Runner.ID {
		t.Errorf("runners at GitHub = %+v, want only the new registration %d", runners, out.RunnerID)
	}
}

func TestRegisterRunnerRefusesAnOnlineRunnerOfTheSameName(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-3")
	other, err := e.api.CreateJITConfig(e.ctx, acme, JITRequest{Name: in.Name, RunnerGroupID: 1, Labels: in.Labels})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := githubdouble.NewRunnerClient(e.gh.URL()).ConnectJIT(e.ctx, other.EncodedConfig); err != nil {
		t.Fatal(err)
	}
	_, err = e.gha.RegisterRunner(e.ctx, in)
	if errType(err) != workflows.ErrNotOwned {
		t.Fatalf("error = %v, want NotOwned", err)
	}
	e.mustNotLeak("the error", err.Error())
	if len(e.gh.Runners()) != 1 {
		t.Errorf("the online runner was touched: %+v", e.gh.Runners())
	}
}

func TestRegisterRunnerRefusesASecretItDoesNotOwn(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-4")
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: e.ns,
		Annotations: map[string]string{runnerpod.AnnotationWorkflowID: "runner/other/x"}}, StringData: map[string]string{"k": "v"}}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(e.ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.gha.RegisterRunner(e.ctx, in)
	if errType(err) != workflows.ErrNotOwned || !strings.Contains(err.Error(), "runner/other/x") {
		t.Fatalf("error = %v, want NotOwned naming the owner", err)
	}
	if n := e.gh.TotalCalls(); n != 0 {
		t.Errorf("%d GitHub calls for a registration refused before minting anything", n)
	}
	got, _ := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if string(got.Data["k"]) != "v" {
		t.Error("the foreign secret was changed")
	}
}

func TestRegisterRunnerMintsAgainWhenTheRegistrationIsGone(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-5")
	first, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.api.RemoveRunner(e.ctx, acme, first.RunnerID); err != nil {
		t.Fatal(err)
	}
	second, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil || second.Adopted || second.RunnerID == first.RunnerID {
		t.Fatalf("second = %+v, %v; want a new registration", second, err)
	}
	secret, _ := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if secret.Annotations[runnerpod.AnnotationRunnerID] != strconv.FormatInt(second.RunnerID, 10) {
		t.Errorf("secret annotates runner %s, want %d", secret.Annotations[runnerpod.AnnotationRunnerID], second.RunnerID)
	}
}

// A runner whose pod came first (changeSecretAfterScheduling) may have run its job with the
// registration an earlier attempt wrote, and GitHub then removed it: a retry adopts it rather
// than mint one that no pod would use, left at GitHub for good.
func TestRegisterRunnerForAWaitingPodAdoptsWhatItWroteEvenWhenGone(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-6")
	in.PodFirst = true
	first, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.api.RemoveRunner(e.ctx, acme, first.RunnerID); err != nil {
		t.Fatal(err)
	}
	second, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil || !second.Adopted || second.RunnerID != first.RunnerID {
		t.Fatalf("second = %+v, %v; want the first registration adopted", second, err)
	}
	if left, err := e.api.ListRunners(e.ctx, acme, in.Name); err != nil || len(left) != 0 {
		t.Errorf("GitHub has %+v (%v) named %s, want no registration minted again", left, err, in.Name)
	}
}

func TestRegisterRunnerTokenMode(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-6")
	in.Mode = workflows.RegistrationToken
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.RunnerID != 0 || out.RunnerURL != e.gh.URL()+"acme" {
		t.Errorf("output = %+v", out)
	}
	secret, _ := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if tok := string(secret.Data[runnerpod.SecretKeyRegistrationToken]); !contains(e.gh.IssuedSecrets(), tok) {
		t.Error("the secret does not hold the registration token GitHub issued")
	}
}

func TestRemoveRunnerWaitsForTheJobThenTreatsGoneAsDone(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-7")
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	rc := githubdouble.NewRunnerClient(e.gh.URL())
	session, err := rc.ConnectJIT(e.ctx, string(secret.Data[runnerpod.SecretKeyJITConfig]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux"}}); err != nil {
		t.Fatal(err)
	}
	job, err := rc.AcquireJob(e.ctx, session, 10*time.Second)
	if err != nil || job == nil {
		t.Fatalf("acquire job: %v %v", job, err)
	}
	ref := workflows.RunnerRef{Scope: acme, RunnerID: out.RunnerID, Name: in.Name}
	if st, err := e.gha.GetRunner(e.ctx, ref); err != nil || !st.Found || !st.Online || !st.Busy {
		t.Fatalf("status = %+v, %v; want online and busy", st, err)
	}
	_, err = e.gha.RemoveRunner(e.ctx, ref)
	if errType(err) != workflows.ErrRunnerBusy {
		t.Fatalf("remove while busy = %v, want RunnerBusy", err)
	}
	if err := rc.CompleteJob(e.ctx, session, job.ID, "success"); err != nil {
		t.Fatal(err)
	}
	// The double, like GitHub, removes an ephemeral runner after its job: 404 is success.
	res, err := e.gha.RemoveRunner(e.ctx, ref)
	if err != nil || res.Removed {
		t.Fatalf("remove after the job = %+v, %v; want already gone", res, err)
	}
	if st, err := e.gha.GetRunner(e.ctx, ref); err != nil || st.Found {
		t.Errorf("status after removal = %+v, %v", st, err)
	}
}

func TestRunnerLookupByNameAndListing(t *testing.T) {
	e := newEnv(t)
	var ids []int64
	for _, name := range []string{"pool-b-x-2", "pool-a-ab12-9", "pool-a-ab12-8", "pool-ab-1"} {
		cfg, err := e.api.CreateJITConfig(e.ctx, acme, JITRequest{Name: name, RunnerGroupID: 1, Labels: []string{"linux"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cfg.Runner.ID)
	}
	st, err := e.gha.GetRunner(e.ctx, workflows.RunnerRef{Scope: acme, Name: "POOL-A-AB12-9"})
	if err != nil || !st.Found || st.RunnerID != ids[1] || st.Online {
		t.Errorf("by name = %+v, %v", st, err)
	}
	list, err := e.gha.ListRunners(e.ctx, workflows.ListRunnersInput{Scope: acme, NamePrefix: "pool-a-"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Runners {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "pool-a-ab12-8,pool-a-ab12-9" {
		t.Errorf("listed %v, want the pool's two runners sorted", names)
	}
	if _, err := e.gha.ListRunners(e.ctx, workflows.ListRunnersInput{}); errType(err) != workflows.ErrInvalidSpec {
		t.Errorf("listing without a scope = %v, want InvalidSpec", err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if s != "" && v == s {
			return true
		}
	}
	return false
}

// Asked for the pod, the registration creates it owned by the Secret it wrote (deleting the
// Secret then takes the pod with it); a retry adopts both.
func TestRegisterRunnerCreatesThePodOwnedByItsSecret(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-9")
	pod := e.podInput(in.Name)
	pod.SecretName, pod.SecretUID = "", ""
	in.Pod = &pod
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Pod == nil || out.Pod.UID == "" || out.SecretUID == "" {
		t.Fatalf("output = %+v, want the pod and the Secret's UID", out)
	}
	created, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := created.OwnerReferences
	if len(owners) != 1 || owners[0].Kind != "Secret" || owners[0].Name != in.Name || string(owners[0].UID) != out.SecretUID {
		t.Errorf("pod owners = %+v, want the Secret %s (%s)", owners, in.Name, out.SecretUID)
	}
	if string(created.UID) != out.Pod.UID {
		t.Errorf("pod UID %s, output says %s", created.UID, out.Pod.UID)
	}
	again, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil || !again.Adopted || again.Pod == nil || again.Pod.UID != out.Pod.UID || again.SecretUID != out.SecretUID {
		t.Fatalf("retry = %+v, %v; want the registration and the pod adopted", again, err)
	}
	if n := e.gh.CallCount(jitRoute); n != 1 {
		t.Errorf("generate-jitconfig called %d times, want 1", n)
	}
}

// A bad pod template fails the registration before anything is registered or written.
func TestRegisterRunnerWithABadPodTemplateRegistersNothing(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-8")
	pod := e.podInput(in.Name)
	pod.Template.Spec.Containers = []corev1.Container{{Name: "not-the-runner", Image: "x"}}
	in.Pod = &pod
	if _, err := e.gha.RegisterRunner(e.ctx, in); err == nil || !strings.Contains(err.Error(), "no container named") {
		t.Fatalf("error = %v, want the template refused", err)
	}
	if n := e.gh.TotalCalls(); n != 0 {
		t.Errorf("%d GitHub calls, want none", n)
	}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{}); err == nil {
		t.Error("a Secret was written")
	}
}

// In registration-token mode the pod learns the runner URL from the registration.
func TestRegisterRunnerTokenModeCreatesThePodWithTheRunnerURL(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-7")
	in.Mode = workflows.RegistrationToken
	pod := podInput(workflows.RegistrationToken)
	pod.Name, pod.Namespace, pod.WorkflowID, pod.RunnerURL = in.Name, e.ns, in.WorkflowID, ""
	in.Pod = &pod
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil || out.Pod == nil {
		t.Fatalf("pod: %v (output %+v)", err, out)
	}
	var url string
	for _, c := range created.Spec.Containers {
		for _, env := range c.Env {
			if c.Name == runnerpod.RunnerContainerName && env.Name == runnerpod.EnvRunnerURL {
				url = env.Value
			}
		}
	}
	if url == "" || url != out.RunnerURL {
		t.Errorf("pod's runner URL %q, registration's %q", url, out.RunnerURL)
	}
}

// A retry after the pod was created adopts the registration even when GitHub no longer lists
// the runner (an ephemeral runner is removed once it ran its job): minting again would leave a
// registration nothing uses.
func TestRegisterRunnerRetryAfterThePodRanAdoptsWithoutMinting(t *testing.T) {
	e := newEnv(t)
	in := e.registration("pool-a-ab12-6")
	pod := e.podInput(in.Name)
	pod.SecretName, pod.SecretUID = "", ""
	in.Pod = &pod
	out, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.gha.RemoveRunner(e.ctx, workflows.RunnerRef{Scope: in.Scope, RunnerID: out.RunnerID, Name: in.Name}); err != nil {
		t.Fatal(err)
	}
	again, err := e.gha.RegisterRunner(e.ctx, in)
	if err != nil || !again.Adopted || again.RunnerID != out.RunnerID || again.Pod == nil || again.Pod.UID != out.Pod.UID {
		t.Fatalf("retry = %+v, %v; want the first registration and its pod adopted", again, err)
	}
	if n := e.gh.CallCount(jitRoute); n != 1 {
		t.Errorf("generate-jitconfig called %d times, want 1", n)
	}
}
