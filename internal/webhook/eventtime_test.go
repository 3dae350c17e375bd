package webhook

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Every event handed to a scale window carries its own time, when the intake took the
// delivery: its pool counts the job's reservation from it, however long the batch then waits.
// GitHub's created_at is not that time (a job that waited for an approval queues long after
// it was created).
func TestEventsCarryTheTimeTheIntakeTookThem(t *testing.T) {
	pool := unique("eventtime-")
	startPool(t, orgPool(pool, "eventtime-org", "", "linux"))
	h := newHandler(t, pool)
	payload := fmt.Appendf(nil, `{"action":"queued","workflow_job":{"id":900,"run_id":1,"status":"queued",`+
		`"created_at":"2020-01-01T00:00:00Z","started_at":"2020-01-01T00:00:00Z","labels":["self-hosted","linux"]},`+
		`"repository":{"full_name":"eventtime-org/app","owner":{"login":"eventtime-org","type":"Organization"}}}`)
	before := time.Now()
	if w := serve(h, delivery("workflow_job", "et-1", payload)); w.Code != http.StatusAccepted {
		t.Fatalf("queued: %d %s", w.Code, w.Body)
	}
	after := time.Now()
	events := windowEvents(t, pool)
	if len(events) != 1 {
		t.Fatalf("window events %+v, want one", events)
	}
	if at := events[0].At; at.Before(before) || at.After(after) {
		t.Errorf("event time %v, want the delivery's, between %v and %v", at, before, after)
	}
}
