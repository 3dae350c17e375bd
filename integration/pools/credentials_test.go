package pools

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
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
