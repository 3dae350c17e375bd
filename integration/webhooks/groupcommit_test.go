package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/internal/webhook"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

const (
	floodJobs    = 400
	floodSenders = 32
	// refusedSignal is the window signal Temporal refuses, well into the flood.
	refusedSignal = 5
)

// refusingTemporal is the intake's real Temporal client, except that it answers one scale-window
// signal, the n-th, with Unavailable instead of sending it (a frontend restarting mid-flood),
// and remembers the jobs that signal carried.
type refusingTemporal struct {
	client.Client
	n int

	mu      sync.Mutex
	calls   int
	refused []int64
}

func (r *refusingTemporal) SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
	options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error) {
	r.mu.Lock()
	r.calls++
	refuse := r.calls == r.n
	if refuse {
		for _, ev := range signalArg.(workflows.WorkflowJobsSignal).Events {
			r.refused = append(r.refused, ev.JobID)
		}
	}
	r.mu.Unlock()
	if refuse {
		return nil, serviceerror.NewUnavailable("frontend restarting")
	}
	return r.Client.SignalWithStartWorkflow(ctx, workflowID, signalName, signalArg, options, workflow, workflowArgs...)
}

func (r *refusingTemporal) refusedJobs() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.refused))
}

// TestFloodSharesSignalsAndLosesNoAcknowledgement: 400 queued webhooks for one pool from 32
// concurrent senders, while Temporal refuses one of the window signals. The deliveries share
// signals (far fewer signals than deliveries); every delivery the refused signal carried is
// answered 503 and every other one 202; the window's histories hold each acknowledged event
// exactly once and the pool reserves exactly the acknowledged jobs. Redelivering the refused
// deliveries, as an operator would from GitHub's delivery log, reserves the rest.
func TestFloodSharesSignalsAndLosesNoAcknowledgement(t *testing.T) {
	refusing := &refusingTemporal{n: refusedSignal}
	in := newIntakeWith(t, intakeOptions{webhookWorkers: floodSenders, temporal: func(c client.Client) webhook.Temporal {
		refusing.Client = c
		return refusing
	}})
	const org = "flood-org"
	if err := in.github.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	pool := "flood"
	in.apply(in.spec(workflows.PoolSpec{Name: pool, Organization: org, Labels: []string{"linux"}}))
	in.waitForRoutable(pool)

	in.github.HoldWebhooks()
	var jobs []int64
	for range floodJobs {
		jobs = append(jobs, in.queue(org+"/app", []string{"self-hosted", "linux"}))
	}
	in.settle(in.github.ReleaseWebhooks(githubdouble.ReleaseShuffled), pool)

	acked, unavailable := in.answeredJobs()
	refused := refusing.refusedJobs()
	t.Logf("%d deliveries: %d acknowledged, %d answered 503; the refused signal carried %d", len(jobs), len(acked), len(unavailable), len(refused))
	if len(refused) == 0 || !slices.Equal(unavailable, refused) {
		t.Errorf("deliveries answered 503: %v; want exactly the jobs of the refused signal %v", unavailable, refused)
	}
	if len(acked)+len(unavailable) != len(jobs) {
		t.Errorf("%d acknowledged and %d unavailable of %d deliveries; every other answer is wrong", len(acked), len(unavailable), len(jobs))
	}
	signals, signalled := in.windowSignals(pool, len(acked))
	t.Logf("the window got %d events in %d signals", len(signalled), signals)
	if signals*4 > len(jobs) {
		t.Errorf("%d window signals for %d concurrent deliveries: not shared", signals, len(jobs))
	}
	if slices.Sort(signalled); !slices.Equal(signalled, acked) {
		t.Errorf("the window's events are not the acknowledged jobs once each: %d events for %d acknowledgements", len(signalled), len(acked))
	}
	in.checkReserved(pool, acked)

	for _, d := range in.github.Deliveries() {
		if d.StatusCode == http.StatusServiceUnavailable {
			if err := in.github.Redeliver(d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	in.settle(len(refused), pool)
	in.checkReserved(pool, jobs)
}

// answeredJobs sorts the jobs of the delivered queued events by the intake's answer: 202, and
// 503. A job appears once per answer it got.
func (in *intake) answeredJobs() (acked, unavailable []int64) {
	for _, d := range in.github.Deliveries() {
		switch d.StatusCode {
		case http.StatusAccepted:
			acked = append(acked, d.JobID)
		case http.StatusServiceUnavailable:
			unavailable = append(unavailable, d.JobID)
		}
	}
	slices.Sort(acked)
	slices.Sort(unavailable)
	return acked, unavailable
}

// windowSignals reads every run of the pool's scale window and returns how many workflow-jobs
// signals they got and the jobs those carried, once visibility lists runs holding at least
// want events (closed runs reach the listing a moment after they close).
func (in *intake) windowSignals(pool string, want int) (signals int, jobs []int64) {
	in.t.Helper()
	in.eventually(fmt.Sprintf("window runs holding %d events listed", want), func() bool {
		signals, jobs = in.readWindowSignals(pool)
		return len(jobs) >= want
	})
	return signals, jobs
}

func (in *intake) readWindowSignals(pool string) (signals int, jobs []int64) {
	ctx := context.Background()
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", workflows.ScaleWindowWorkflowID(pool))}
	for {
		resp, err := in.c.ListWorkflow(ctx, req)
		if err != nil {
			in.t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			it := in.c.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false,
				enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					in.t.Fatal(err)
				}
				a := ev.GetWorkflowExecutionSignaledEventAttributes()
				if a.GetSignalName() != workflows.SignalWorkflowJobs {
					continue
				}
				var batch workflows.WorkflowJobsSignal
				if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &batch); err != nil {
					in.t.Fatal(err)
				}
				signals++
				for _, ev := range batch.Events {
					jobs = append(jobs, ev.JobID)
				}
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			return signals, jobs
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}
