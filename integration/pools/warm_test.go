package pools

import (
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// jitRoute is the GitHub call a registration costs (organization scope).
const jitRoute = "POST /orgs/{org}/actions/runners/generate-jitconfig"

// A pool with warmRegistrations: 3 mints 3 in quiet time — GitHub lists 3 offline runners with
// the pool's labels, 3 Secrets in the worker's warm namespace hold their JIT configurations. A
// burst of 3 jobs, delivered as webhooks through the starter's intake, runs on them with no
// generate-jitconfig call between the burst and the last job's start. The pool refills to 3
// afterwards (the taken ones' Secrets gone from the warm namespace), and warmRegistrations: 0
// removes them all, at GitHub and their Secrets. No history of the test carries a JIT
// configuration the double issued.
func TestWarmRegistrationsServeABurstWithoutRegistering(t *testing.T) {
	warmNS := world.Kube.NewNamespace(t)
	p := newPoolTestWith(t, "warm", func(c *workerapp.Config) { c.WarmNamespace = warmNS })
	p.warmNS = warmNS
	p.webhooks()
	spec := p.spec(0, 5, "5s")
	spec.WarmRegistrations = 3
	p.apply(spec)

	st := p.eventually(wait, "3 warm registrations", func(st workflows.PoolStatus) bool { return st.WarmReady == 3 })
	minted := warmNames(st)
	jitConfigs := p.checkWarmAtGitHubAndSecrets(minted)

	from := len(world.GitHub.CallLog())
	jobs := p.queueJobs(3)
	var lastStart time.Time
	waitFor(t, wait, "the burst's 3 jobs completed", func() bool {
		lastStart = time.Time{}
		for _, id := range jobs {
			j, _ := world.GitHub.Job(id)
			if j.Status != githubdouble.StatusCompleted {
				return false
			}
			if !slices.Contains(minted, j.RunnerName) {
				t.Fatalf("job %d ran on %s, not on one of the warm registrations %v", id, j.RunnerName, minted)
			}
			if j.StartedAt.After(lastStart) {
				lastStart = j.StartedAt
			}
		}
		return true
	})
	for _, c := range world.GitHub.CallLog()[from:] {
		if c.Route == jitRoute && !c.At.After(lastStart) {
			t.Errorf("a JIT configuration was generated at %s, during the burst (last job started %s)", c.At, lastStart)
		}
	}

	st = p.eventually(wait, "refilled to 3 after the burst", func(st workflows.PoolStatus) bool {
		return st.WarmReady == 3 && len(st.Runners) == 0
	})
	refilled := warmNames(st)
	if slices.ContainsFunc(refilled, func(n string) bool { return slices.Contains(minted, n) }) {
		t.Errorf("refilled %v reuses a name of %v", refilled, minted)
	}
	jitConfigs = append(jitConfigs, p.checkWarmAtGitHubAndSecrets(refilled)...)
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.RunnerWorkflowID(p.name, minted[0]), "", "runner-warm")
	}

	spec.WarmRegistrations = 0
	p.apply(spec)
	p.eventually(wait, "no warm registrations", func(st workflows.PoolStatus) bool { return len(st.Warm) == 0 })
	waitFor(t, wait, "no runner at GitHub and no Secret left", func() bool {
		return len(p.githubRunners()) == 0 && len(p.poolSecrets()) == 0 && len(p.secretsIn(p.ns)) == 0
	})
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-warm")
	}
	p.checkNoJITConfigInHistories(jitConfigs)
}

// webhooks routes the world's GitHub webhooks through the starter's intake for this test, so a
// queued job reserves capacity in the pool and an in_progress one reaches the runner that took
// it, as in production.
func (p *poolTest) webhooks() {
	const secret = "warm test secret"
	h, err := webhook.NewHandler(webhook.Config{Secret: []byte(secret), Temporal: p.c, Logger: quietLogger()})
	if err != nil {
		p.t.Fatal(err)
	}
	srv := httptest.NewServer(h.Routes())
	world.GitHub.SetWebhookSecret(secret)
	world.GitHub.SetWebhookURL(srv.URL + "/webhook")
	p.t.Cleanup(func() {
		world.GitHub.SetWebhookURL("")
		srv.Close()
	})
}

func warmNames(st workflows.PoolStatus) []string {
	var out []string
	for _, w := range st.Warm {
		out = append(out, w.Name)
	}
	return out
}

// checkWarmAtGitHubAndSecrets checks that GitHub lists exactly these runners of the pool,
// offline, with its labels, and that each has its Secret with a JIT configuration in the warm
// namespace (once the taken ones' are gone), which it returns.
func (p *poolTest) checkWarmAtGitHubAndSecrets(names []string) []string {
	p.t.Helper()
	var listed []string
	for _, r := range p.githubRunners() {
		listed = append(listed, r.Name)
		if r.Status != "offline" || !r.JIT || !slices.Contains(r.Labels, "self-hosted") || !slices.Contains(r.Labels, "linux") {
			p.t.Errorf("GitHub lists %s as %s, JIT %v, labels %v; want an offline JIT runner with the pool's labels", r.Name, r.Status, r.JIT, r.Labels)
		}
	}
	if slices.Sort(listed); !slices.Equal(listed, slices.Sorted(slices.Values(names))) {
		p.t.Errorf("GitHub lists %v, want the warm registrations %v", listed, names)
	}
	var configs, secrets []string
	waitFor(p.t, wait, "one Secret per warm registration", func() bool {
		configs, secrets = nil, nil
		for _, s := range p.poolSecrets() {
			secrets = append(secrets, s.Name)
			if cfg := string(s.Data[runnerpod.SecretKeyJITConfig]); cfg != "" {
				configs = append(configs, cfg)
			}
		}
		slices.Sort(secrets)
		return slices.Equal(secrets, slices.Sorted(slices.Values(names))) && len(configs) == len(names)
	})
	return configs
}

// poolSecrets are the pool's Secrets in the warm namespace (the runner namespace for a pool
// test without one).
func (p *poolTest) poolSecrets() []corev1.Secret {
	p.t.Helper()
	return p.secretsIn(cmp.Or(p.warmNS, p.ns))
}

// secretsIn are the pool's Secrets in ns.
func (p *poolTest) secretsIn(ns string) []corev1.Secret {
	p.t.Helper()
	list, err := world.Kubernetes.CoreV1().Secrets(ns).List(p.ctx, metav1.ListOptions{LabelSelector: runnerpod.LabelPool + "=" + p.name})
	if err != nil {
		p.t.Fatal(err)
	}
	return list.Items
}

// checkNoJITConfigInHistories reads the full history of every workflow of the test — the pool,
// its runners, its scale windows — and searches the raw event bytes for every credential the
// double issued. configs, read from the warm registrations' Secrets, must be among them, so the
// scan is known to cover the credentials the pool handled.
func (p *poolTest) checkNoJITConfigInHistories(configs []string) {
	p.t.Helper()
	issued := world.GitHub.IssuedSecrets()
	for _, c := range configs {
		if !slices.Contains(issued, c) {
			p.t.Fatalf("a warm registration's JIT configuration is not among the double's issued credentials: the scan would miss it")
		}
	}
	query := fmt.Sprintf(`WorkflowId = %q OR WorkflowId = %q OR RunnerPool = %q`,
		workflows.PoolWorkflowID(p.name), workflows.ScaleWindowWorkflowID(p.name), p.name)
	var runs [][2]string
	waitFor(p.t, wait, "the test's workflows listed", func() bool {
		resp, err := p.c.ListWorkflow(p.ctx, listRequest(query))
		if err != nil {
			p.t.Fatal(err)
		}
		runs = runs[:0]
		runners := 0
		for _, e := range resp.GetExecutions() {
			runs = append(runs, [2]string{e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()})
			if e.GetType().GetName() == workflows.RunnerWorkflowType {
				runners++
			}
		}
		return runners >= 3
	})
	for _, run := range runs {
		raw, err := testworld.HistoryBytes(context.Background(), p.c, run[0], run[1])
		if err != nil {
			p.t.Fatal(err)
		}
		if leaked := testworld.FindSecrets(raw, issued); len(leaked) > 0 {
			p.t.Errorf("history of %s carries %d credential(s) the double issued", run[0], len(leaked))
		}
	}
	p.t.Logf("scanned %d histories for %d issued credentials", len(runs), len(issued))
}
