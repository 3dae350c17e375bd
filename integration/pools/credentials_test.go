package pools

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/workflows"
)

// runnerAccount is the runners' ServiceAccount in the test: one that may list and read every
// Secret of the runner namespace, as ARC's "kubernetes" container mode or a deployment job's
// broad role allows.
const runnerAccount = "runner"

// A job cannot take another runner's credential. The pool keeps 3 warm registrations and its
// runners run as a ServiceAccount that may list and read Secrets in their namespace; a job's
// pod, played by a client holding a token of that ServiceAccount, looks through every Secret it
// can read there before, during and after a burst of 3 jobs, and finds no credential of a
// registration no runner has taken: the warm ones wait in the worker's warm namespace, which
// that client may not read, and a runner's own Secret appears only once it started.
func TestAJobFindsNoUnusedCredentialInItsNamespace(t *testing.T) {
	warmNS := world.Kube.NewNamespace(t)
	p := newPoolTestWith(t, "creds", func(c *workerapp.Config) { c.WarmNamespace = warmNS })
	p.warmNS = warmNS
	p.webhooks()
	job := p.jobClient()

	spec := p.spec(0, 5, "5s")
	spec.WarmRegistrations = 3
	spec.Template.Spec.ServiceAccountName = runnerAccount
	p.apply(spec)
	p.eventually(wait, "3 warm registrations", func(st workflows.PoolStatus) bool { return st.WarmReady == 3 })
	if seen := p.checkJobFindsNoUnusedCredential(job, "before the burst"); seen != 0 {
		t.Errorf("before the burst a job reads %d runner credentials in its namespace, want none (no runner has started)", seen)
	}

	jobs := p.queueJobs(3)
	seenDuring := 0
	waitFor(t, wait, "the burst's 3 jobs completed", func() bool {
		seenDuring = max(seenDuring, p.checkJobFindsNoUnusedCredential(job, "during the burst"))
		for _, id := range jobs {
			if j, _ := world.GitHub.Job(id); j.Status != githubdouble.StatusCompleted {
				return false
			}
		}
		return true
	})
	p.eventually(wait, "refilled to 3 after the burst", func(st workflows.PoolStatus) bool {
		return st.WarmReady == 3 && len(st.Runners) == 0
	})
	p.checkJobFindsNoUnusedCredential(job, "after the burst")
	t.Logf("during the burst the job read at most %d started runners' own credentials", seenDuring)

	if _, err := job.CoreV1().Secrets(warmNS).List(p.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the job lists the warm namespace's Secrets: %v, want forbidden", err)
	}
}

// A runner's credential is in its namespace only while its pod can use it. The pool's runners
// (one warm, one cold) are held unscheduled for a minute, as a pod waiting for a node is; all
// that time a job whose ServiceAccount reads every Secret of the namespace finds no JIT
// configuration of a runner whose pod is not scheduled yet, and then both jobs run. The Secrets'
// lives (created once the pod is scheduled, deleted once the runner started) are logged: the
// window docs/security.md states.
func TestAJobFindsNoCredentialOfARunnerWhosePodWaitsForANode(t *testing.T) {
	warmNS := world.Kube.NewNamespace(t)
	p := newPoolTestWith(t, "creds-held", func(c *workerapp.Config) { c.WarmNamespace = warmNS })
	p.warmNS = warmNS
	p.webhooks()
	job := p.jobClient()
	lives := p.watchSecretLives()

	spec := p.spec(0, 2, "1s")
	spec.WarmRegistrations = 1
	spec.Template.Spec.ServiceAccountName = runnerAccount
	spec.Template.Annotations[simulator.AnnotationUnscheduledFor] = "60s"
	p.apply(spec)
	p.eventually(wait, "1 warm registration", func(st workflows.PoolStatus) bool { return st.WarmReady == 1 })

	jobs := p.queueJobs(2)
	waitFor(t, wait, "the 2 runners' pods", func() bool { return len(p.pods()) == 2 })
	checks, caught := 0, map[string]bool{}
	for p.unscheduledPods() > 0 {
		p.checkNoCredentialOfAnUnscheduledPod(job, caught)
		checks++
		time.Sleep(500 * time.Millisecond)
	}
	if checks == 0 {
		t.Fatal("the runners' pods were scheduled before the job looked: the hold did not hold")
	}
	t.Logf("the job looked %d times while the runners' pods waited for a node", checks)
	waitFor(t, wait, "the 2 jobs completed", func() bool {
		for _, id := range jobs {
			if j, _ := world.GitHub.Job(id); j.Status != githubdouble.StatusCompleted {
				return false
			}
		}
		return true
	})
	p.eventually(wait, "no runner left", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 })
	for name, life := range lives() {
		t.Logf("credential window: Secret %s/%s existed %s (from its pod's scheduling %s after it)",
			p.ns, name, life.lived(), life.afterScheduling())
	}
}

// checkNoCredentialOfAnUnscheduledPod reads every Secret the job may read, then the pods: a JIT
// configuration whose runner's pod is still unscheduled after the read (or has no pod) was
// readable before that runner could connect, and fails the test (once a Secret: caught).
func (p *poolTest) checkNoCredentialOfAnUnscheduledPod(job kubernetes.Interface, caught map[string]bool) {
	p.t.Helper()
	list, err := job.CoreV1().Secrets(p.ns).List(p.ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatalf("the job lists its namespace's Secrets: %v", err)
	}
	scheduled := map[string]bool{}
	for _, pod := range p.pods() {
		scheduled[pod.Labels[runnerpod.LabelRunner]] = pod.Spec.NodeName != ""
	}
	for _, s := range list.Items {
		runner := s.Labels[runnerpod.LabelRunner]
		if len(s.Data[runnerpod.SecretKeyJITConfig]) > 0 && !scheduled[runner] && !caught[s.Name] {
			caught[s.Name] = true
			p.t.Errorf("the job read the JIT configuration of runner %s in Secret %s/%s while its pod waited for a node", runner, p.ns, s.Name)
		}
	}
}

// unscheduledPods counts the pool's pods not bound to a node.
func (p *poolTest) unscheduledPods() int {
	n := 0
	for _, pod := range p.pods() {
		if pod.Spec.NodeName == "" {
			n++
		}
	}
	return n
}

// secretLife is when a runner's Secret was created and deleted, and its pod scheduled, as a
// watch saw them.
type secretLife struct{ created, deleted, scheduled time.Time }

func (l secretLife) lived() time.Duration {
	if l.deleted.IsZero() {
		return -1
	}
	return l.deleted.Sub(l.created).Round(time.Millisecond)
}

func (l secretLife) afterScheduling() time.Duration {
	return l.created.Sub(l.scheduled).Round(time.Millisecond)
}

// watchSecretLives watches the namespace's Secrets and pods with the test's own rights until the
// test ends; the returned function gives each runner's Secret's life so far.
func (p *poolTest) watchSecretLives() func() map[string]secretLife {
	p.t.Helper()
	ctx, cancel := context.WithCancel(p.ctx)
	p.t.Cleanup(cancel)
	opts := metav1.ListOptions{LabelSelector: runnerpod.LabelManagedBy + "=" + runnerpod.ManagedByValue}
	secrets, err := world.Kubernetes.CoreV1().Secrets(p.ns).Watch(ctx, opts)
	if err != nil {
		p.t.Fatal(err)
	}
	pods, err := world.Kubernetes.CoreV1().Pods(p.ns).Watch(ctx, opts)
	if err != nil {
		p.t.Fatal(err)
	}
	var mu sync.Mutex
	lives := map[string]secretLife{}
	note := func(name string, f func(*secretLife)) {
		mu.Lock()
		defer mu.Unlock()
		l := lives[name]
		f(&l)
		lives[name] = l
	}
	go func() {
		for ev := range secrets.ResultChan() {
			s, ok := ev.Object.(*corev1.Secret)
			if !ok {
				continue
			}
			now := time.Now()
			switch ev.Type {
			case watch.Added:
				note(s.Name, func(l *secretLife) { l.created = now })
			case watch.Deleted:
				note(s.Name, func(l *secretLife) { l.deleted = now })
			}
		}
	}()
	go func() {
		for ev := range pods.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
				note(pod.Name, func(l *secretLife) {
					if l.scheduled.IsZero() {
						l.scheduled = time.Now()
					}
				})
			}
		}
	}()
	return func() map[string]secretLife {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]secretLife{}
		for name, l := range lives {
			if !l.created.IsZero() {
				out[name] = l
			}
		}
		return out
	}
}

// jobClient grants the runners' ServiceAccount list, get and watch on the runner namespace's
// Secrets and returns a client authenticated by a token of that ServiceAccount.
func (p *poolTest) jobClient() kubernetes.Interface {
	p.t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-secrets", Namespace: p.ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-secrets", Namespace: p.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: runnerAccount, Namespace: p.ns}},
	}
	rbac := world.Kubernetes.RbacV1()
	if _, err := rbac.Roles(p.ns).Create(p.ctx, role, metav1.CreateOptions{}); err != nil {
		p.t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(p.ns).Create(p.ctx, binding, metav1.CreateOptions{}); err != nil {
		p.t.Fatal(err)
	}
	cfg, err := world.Kube.ServiceAccountConfig(p.ctx, p.ns, runnerAccount)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	// The grant works: without it the test would prove nothing.
	waitFor(p.t, wait, "the runners' ServiceAccount reads its namespace's Secrets", func() bool {
		_, err := c.CoreV1().Secrets(p.ns).List(p.ctx, metav1.ListOptions{})
		return err == nil
	})
	return c
}

// checkJobFindsNoUnusedCredential reads every Secret the job may read in its namespace, then
// the pool's warm registrations (in that order: a registration taken in between is copied into
// the namespace before the pool's status says it was taken, never after), and fails the test if
// the job read the credential of one of them. It returns how many JIT configurations the job
// read (started runners' own).
func (p *poolTest) checkJobFindsNoUnusedCredential(job kubernetes.Interface, when string) int {
	p.t.Helper()
	list, err := job.CoreV1().Secrets(p.ns).List(p.ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatalf("%s: the job lists its namespace's Secrets: %v", when, err)
	}
	read := map[string]string{} // JIT configuration → Secret
	for _, s := range list.Items {
		if cfg := string(s.Data[runnerpod.SecretKeyJITConfig]); cfg != "" {
			read[cfg] = s.Name
		}
	}
	warm := warmNames(p.status())
	unused := p.unusedCredentials(warm)
	for cfg, name := range read {
		if reg, ok := unused[cfg]; ok {
			p.t.Errorf("%s: the job read the credential of warm registration %s (no runner took it) in Secret %s/%s", when, reg, p.ns, name)
		}
	}
	for _, s := range list.Items {
		if slices.Contains(warm, s.Name) {
			p.t.Errorf("%s: the job reads Secret %s/%s of a warm registration", when, p.ns, s.Name)
		}
	}
	return len(read)
}

// unusedCredentials are the JIT configurations of the pool's warm registrations (those no
// runner has taken), read with the test's own rights: configuration → registration.
func (p *poolTest) unusedCredentials(warm []string) map[string]string {
	p.t.Helper()
	out := map[string]string{}
	for _, name := range warm {
		s, err := world.Kubernetes.CoreV1().Secrets(p.warmNS).Get(p.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // being minted, or removed
		}
		if err != nil {
			p.t.Fatal(err)
		}
		if cfg := string(s.Data[runnerpod.SecretKeyJITConfig]); cfg != "" {
			out[cfg] = name
		}
	}
	return out
}
