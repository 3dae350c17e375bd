package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/runnerflow/runnerflow/workflows"
)

// BenchmarkWebhookAck measures how long the intake takes to answer a signed queued workflow_job
// delivery end to end against the real Temporal dev server: read, verify, parse, route, and
// signal-with-start the pool's scale window. Deliveries arrive in parallel, as GitHub sends
// them. The time per delivery is the ack latency GitHub sees, less the network.
func BenchmarkWebhookAck(b *testing.B) {
	org, pool := unique("bench-org-"), unique("bench-pool-")
	startPool(b, orgPool(pool, org, "", "linux"))
	b.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), workflows.ScaleWindowWorkflowID(pool), "", "") })
	h, err := NewHandler(Config{Secret: []byte(testSecret), Temporal: tc})
	if err != nil {
		b.Fatal(err)
	}
	waitForPools(b, h.Pools(), pool)
	var job atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := job.Add(1)
			body := fmt.Appendf(nil, `{"action":"queued","workflow_job":{"id":%d,"run_id":1,"status":"queued","labels":["self-hosted","linux"]},`+
				`"repository":{"full_name":"%s/app","owner":{"login":"%s","type":"Organization"}}}`, id, org, org)
			if w := serve(h, delivery("workflow_job", fmt.Sprint("bench-", id), body)); w.Code != http.StatusAccepted {
				b.Errorf("delivery %d: %d %s", id, w.Code, w.Body)
				return
			}
		}
	})
}
