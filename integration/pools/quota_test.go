package pools

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// quotaHold is how long the namespace stays at its quota: twice the longest retry interval of
// the pod create (workflows.QuotaRetryMax) and twice the pool's failure backoff, so a runner
// that failed on the refusal, or a wait that gave up, would show.
func quotaHold() time.Duration {
	return 2 * max(workflows.QuotaRetryMax, workflows.PoolFailureBackoff)
}

// A namespace whose ResourceQuota admits 5 runner pods, and a burst of 20 jobs: 5 runners start
// and the other 15 wait for room — no runner fails, the pool's status and the gauge
// runnerflow_pool_blocked{reason="quota"} show the 15 — until the quota is raised a minute
// later. Then all 20 jobs run, on 20 runners with one JIT configuration each (a refused pod
// mints nothing again), and the block is gone from status and gauge. No history and no log line
// of the worker carries a credential the double issued.
func TestQuotaRefusalsWaitForRoom(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &lockedBuffer{}
	p := newPoolTestWith(t, "quota", func(cfg *workerapp.Config) {
		cfg.Metrics = reg
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	p.webhooks()
	p.setPodQuota(5, true)
	p.apply(p.spec(0, 20, "5s"))

	from := len(world.GitHub.CallLog())
	burstAt := time.Now()
	jobs := p.queueJobs(20)

	st := p.eventually(wait, "15 runners waiting for room", func(st workflows.PoolStatus) bool {
		return len(st.Blocked) == 1 && st.Blocked[0].Runners == 15
	})
	if b := st.Blocked[0]; b.Reason != workflows.BlockQuota || !strings.Contains(b.Message, "exceeded quota") {
		t.Errorf("block %+v, want reason quota with the API server's refusal", b)
	}
	waitFor(t, wait, "runnerflow_pool_blocked at 15", func() bool { return blockedGauge(t, reg, p.name) == 15 })
	var configs []string
	for _, s := range p.poolSecrets() {
		if cfg := string(s.Data[runnerpod.SecretKeyJITConfig]); cfg != "" {
			configs = append(configs, cfg)
		}
	}

	// The quota holds: the 5 admitted runners run their jobs; the others keep waiting, none fails.
	for time.Since(burstAt) < quotaHold() {
		st := p.status()
		if st.Totals.Failed != 0 {
			t.Fatalf("%d runner(s) failed while the namespace was at its quota: %+v", st.Totals.Failed, st.Finished)
		}
		if len(st.Blocked) != 1 || st.Blocked[0].Runners != 15 {
			t.Fatalf("blocked %+v while the namespace is at its quota, want 15 runners waiting", st.Blocked)
		}
		time.Sleep(2 * time.Second)
	}
	if done := completedJobs(jobs); done != 5 {
		t.Errorf("%d jobs completed while the quota admitted 5 pods, want 5", done)
	}

	p.setPodQuota(30, false)
	waitFor(t, 2*wait, "all 20 jobs completed", func() bool { return completedJobs(jobs) == len(jobs) })
	for _, id := range jobs {
		if j, _ := world.GitHub.Job(id); j.Conclusion != githubdouble.ConclusionSuccess {
			t.Errorf("job %d ended %s on %s, want success", id, j.Conclusion, j.RunnerName)
		}
	}
	st = p.eventually(wait, "no runner waiting for room", func(st workflows.PoolStatus) bool { return len(st.Blocked) == 0 })
	waitFor(t, wait, "runnerflow_pool_blocked back at 0", func() bool { return blockedGauge(t, reg, p.name) == 0 })
	if st.Totals.Failed != 0 || st.Totals.Started != 20 {
		t.Errorf("totals %+v, want 20 runners started and none failed", st.Totals)
	}
	minted := 0
	for _, c := range world.GitHub.CallLog()[from:] {
		if c.Route == jitRoute && c.Status < 300 {
			minted++
		}
	}
	if minted != 20 {
		t.Errorf("%d JIT configurations minted for 20 runners, want one each", minted)
	}
	if testworld.RecordingHistories() {
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-quota")
	}
	p.checkNoJITConfigInHistories(configs)
	if leaked := testworld.FindSecrets(logs.Bytes(), world.GitHub.IssuedSecrets()); len(leaked) > 0 {
		t.Errorf("the worker's logs carry %d credential(s) the double issued", len(leaked))
	}
}

// setPodQuota makes the namespace's ResourceQuota "runners" admit n pods. The test world runs
// no quota controller (only the garbage collector), so the test writes the quota's status as
// the controller would: hard at n, and, at the start, nothing used. The API server's admission
// counts usage up by itself on every pod it admits and nothing counts it down, so the first 5
// pods hold the quota however short their jobs: the wait lasts until the raise.
func (p *poolTest) setPodQuota(n int, create bool) {
	p.t.Helper()
	quotas := world.Kubernetes.CoreV1().ResourceQuotas(p.ns)
	hard := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(n), resource.DecimalSI)}
	if create {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "runners"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		if _, err := quotas.Create(p.ctx, q, metav1.CreateOptions{}); err != nil {
			p.t.Fatal(err)
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := quotas.Get(p.ctx, "runners", metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Hard = hard
		if q, err = quotas.Update(p.ctx, q, metav1.UpdateOptions{}); err != nil {
			return err
		}
		q.Status.Hard = hard
		if create {
			q.Status.Used = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(0, resource.DecimalSI)}
		}
		_, err = quotas.UpdateStatus(p.ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		p.t.Fatalf("set the pod quota to %d: %v", n, err)
	}
}

func completedJobs(ids []int64) int {
	n := 0
	for _, id := range ids {
		if j, _ := world.GitHub.Job(id); j.Status == githubdouble.StatusCompleted {
			n++
		}
	}
	return n
}

// blockedGauge reads runnerflow_pool_blocked{pool, reason="quota"} (the highest value any
// label set of the SDK reports; -1 when the series is not there yet).
func blockedGauge(t *testing.T, reg *prometheus.Registry, pool string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := -1.0
	for _, f := range families {
		if f.GetName() != workflows.MetricPoolBlocked {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pool"] == pool && labels["reason"] == workflows.BlockQuota {
				v = max(v, m.GetGauge().GetValue())
			}
		}
	}
	return v
}

// lockedBuffer collects the worker's log lines from its many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
