package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// These tests run the intake against a real Temporal dev server. No worker polls the task
// queues, so the workflows the intake starts stay open and their histories show exactly which
// signals arrived; pools are plain workflow executions of type "pool" carrying the search
// attributes a pool workflow publishes, which is all the intake reads of a pool.
var (
	server *testworld.Temporal
	tc     client.Client
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runnerflow-webhook-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server, err = testworld.StartTemporal(ctx, testworld.TemporalOptions{Dir: dir, SearchAttributes: workflows.SearchAttributeTypes()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start temporal:", err)
		return 1
	}
	defer server.Stop()
	if tc, err = server.Dial(); err != nil {
		fmt.Fprintln(os.Stderr, "dial temporal:", err)
		return 1
	}
	defer tc.Close()
	return m.Run()
}

const testSecret = "s3cr3t for tests"

// delivery builds a signed webhook request.
func delivery(event, id string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", id)
	r.Header.Set("X-Hub-Signature-256", githubdouble.Sign(testSecret, body))
	return r
}

// serve runs one request through the handler's routes.
func serve(h *Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.Routes().ServeHTTP(w, r)
	return w
}

var uniq atomic.Int64

// unique returns a name no other test uses, so tests sharing the server do not see each
// other's pools and windows.
func unique(prefix string) string { return fmt.Sprintf("%s%d", prefix, uniq.Add(1)) }

// newHandler returns a handler on the real server whose pool table has been loaded with the
// given pools visible.
func newHandler(t *testing.T, pools ...string) *Handler {
	t.Helper()
	h, err := NewHandler(Config{Secret: []byte(testSecret), Temporal: tc})
	if err != nil {
		t.Fatal(err)
	}
	waitForPools(t, h.Pools(), pools...)
	return h
}

// waitForPools refreshes the table until every named pool is in it (visibility is eventually
// consistent), failing after a generous bound.
func waitForPools(t testing.TB, table *PoolTable, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := table.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		missing := ""
		for _, n := range names {
			if !hasPool(table.Pools(), n) {
				missing = n
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s never became visible; table %+v", missing, table.Pools())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasPool(pools []Pool, name string) bool {
	for _, p := range pools {
		if p.Name == name {
			return true
		}
	}
	return false
}

// idleQueue is a task queue no worker polls.
const idleQueue = "webhook-test-idle"

// startPool starts an execution of type "pool" with the search attributes (and the memo) a
// pool workflow publishes.
func startPool(t testing.TB, p Pool) {
	t.Helper()
	attrs := []temporal.SearchAttributeUpdate{
		workflows.SearchAttrPool.ValueSet(p.Name),
		workflows.SearchAttrPoolScope.ValueSet(p.Scope.String()),
		workflows.SearchAttrPoolLabels.ValueSet(p.Labels),
	}
	if p.Group != "" {
		attrs = append(attrs, workflows.SearchAttrPoolGroup.ValueSet(p.Group))
	}
	var memo map[string]any
	if p.Ephemeral {
		memo = map[string]any{workflows.MemoPoolEphemeral: true}
	}
	startIdleWithMemo(t, workflows.PoolWorkflowID(p.Name), workflows.PoolWorkflowType, temporal.NewSearchAttributes(attrs...), memo)
}

// startIdle starts a workflow that no worker runs and terminates it when the test ends.
func startIdle(t testing.TB, id, workflowType string, attrs temporal.SearchAttributes) {
	t.Helper()
	startIdleWithMemo(t, id, workflowType, attrs, nil)
}

func startIdleWithMemo(t testing.TB, id, workflowType string, attrs temporal.SearchAttributes, memo map[string]any) {
	t.Helper()
	ctx := context.Background()
	_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: idleQueue, TypedSearchAttributes: attrs, Memo: memo}, workflowType)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.TerminateWorkflow(ctx, id, "", "test over") })
}

// signals decodes every signal of the given name in a workflow's history (all runs' latest).
func signals[T any](t *testing.T, workflowID, name string) []T {
	t.Helper()
	var out []T
	it := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		if e.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED || a.GetSignalName() != name {
			continue
		}
		var v T
		if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// windowEvents are the events the pool's scale window has been signalled, in order.
func windowEvents(t *testing.T, pool string) []workflows.WorkflowJobEvent {
	t.Helper()
	if !workflowExists(workflows.ScaleWindowWorkflowID(pool)) {
		return nil
	}
	var events []workflows.WorkflowJobEvent
	for _, batch := range signals[workflows.WorkflowJobsSignal](t, workflows.ScaleWindowWorkflowID(pool), workflows.SignalWorkflowJobs) {
		events = append(events, batch.Events...)
	}
	return events
}

func workflowExists(id string) bool {
	_, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	return err == nil
}

// deadTemporal returns a lazily connecting client to an address where nothing listens.
func deadTemporal(t *testing.T) client.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.NewLazyClient(client.Options{HostPort: addr, Logger: quietSDKLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// quietSDKLogger discards the SDK's retry chatter.
type quietSDKLogger struct{}

func (quietSDKLogger) Debug(string, ...any) {}
func (quietSDKLogger) Info(string, ...any)  {}
func (quietSDKLogger) Warn(string, ...any)  {}
func (quietSDKLogger) Error(string, ...any) {}

// countingLister passes listings to the real server and counts them.
type countingLister struct {
	n atomic.Int64
}

func (l *countingLister) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	l.n.Add(1)
	return tc.ListWorkflow(ctx, req)
}
