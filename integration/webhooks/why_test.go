package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// `starter why` on jobs the real intake took (or did not): a job its pool has no room for (the
// pool at its maximum), a job whose labels no pool has (kept by the unmatched-jobs workflow,
// with the pool that came closest), and a job whose delivery failed — never received until
// it is redelivered, then held by its pool like the first. Each in text and JSON.
func TestWhyExplainsJobsTheIntakeTookOrMissed(t *testing.T) {
	in := newIntake(t)
	const org = "why-org"
	if err := in.github.AddRepository(githubdouble.RepositorySpec{FullName: org + "/app"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.c.TerminateWorkflow(context.Background(), workflows.UnmatchedJobsWorkflowID, "", "test over") })
	pool := "why-full"
	in.apply(in.spec(workflows.PoolSpec{Name: pool, Organization: org, Labels: []string{"linux"}})) // max 0
	in.waitForRoutable(pool)

	atMax := in.queue(org+"/app", []string{"self-hosted", "linux"})
	in.checkWhy(atMax, poolcli.CauseAtMax, "pool why-full is at its maximum (0 runners")

	unmatched := in.queue(org+"/app", []string{"self-hosted", "linux", "gpu"})
	r := in.checkWhy(unmatched, poolcli.CauseNoPool, "pool why-full lacks [gpu]")
	if r.Facts.Unmatched == nil || r.Facts.Unmatched.Repository != org+"/app" {
		t.Errorf("unmatched record %+v, want the job's repository %s", r.Facts.Unmatched, org+"/app")
	}
	if got := testutil.ToFloat64(in.metrics.Unmatched("recorded")); got != 1 {
		t.Errorf("recorded %v unmatched jobs, want 1", got)
	}

	in.github.DropWebhooks(1)
	lost := in.queue(org+"/app", []string{"self-hosted", "linux"})
	in.waitDelivered()
	in.github.DropWebhooks(0)
	in.checkWhy(lost, poolcli.CauseNotReceived, "never reached the intake")
	for _, d := range in.github.Deliveries() {
		if d.JobID == lost {
			if err := in.github.Redeliver(d.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	r = in.checkWhy(lost, poolcli.CauseAtMax, "at its maximum")
	if !strings.Contains(whyText(t, in, lost), "delivery received") || r.Facts.Reservation == nil || r.Facts.Reservation.QueuedAt.IsZero() {
		t.Errorf("after the redelivery the path does not show the delivery received: %+v", r.Path)
	}
}

// checkWhy waits until `starter why <job> -o json` names the cause, then checks the detail in
// both the JSON and the text output.
func (in *intake) checkWhy(job int64, cause poolcli.Cause, detail string) poolcli.WhyReport {
	in.t.Helper()
	var r poolcli.WhyReport
	in.eventually("why "+strconv.FormatInt(job, 10)+" says "+string(cause), func() bool {
		r = whyJSON(in.t, in, job)
		return r.Cause == cause
	})
	if !r.Waiting || !strings.Contains(r.Detail, detail) {
		in.t.Errorf("why %d: waiting %v, detail %q; want it waiting with %q", job, r.Waiting, r.Detail, detail)
	}
	text := whyText(in.t, in, job)
	if !strings.Contains(text, "Waiting: "+string(cause)) || !strings.Contains(text, detail) {
		in.t.Errorf("why %d (text):\n%s\nwant cause %s with %q", job, text, cause, detail)
	}
	return r
}

func whyArgs(in *intake, job int64, more ...string) []string {
	return append([]string{strconv.FormatInt(job, 10), "--temporal-address", world.Temporal.Address,
		"--namespace", world.Temporal.Namespace}, more...)
}

func whyText(t *testing.T, in *intake, job int64) string {
	t.Helper()
	var out bytes.Buffer
	if err := poolcli.RunWhy(context.Background(), whyArgs(in, job), &out); err != nil {
		t.Fatalf("why %d: %v", job, err)
	}
	return out.String()
}

func whyJSON(t *testing.T, in *intake, job int64) poolcli.WhyReport {
	t.Helper()
	var out bytes.Buffer
	if err := poolcli.RunWhy(context.Background(), whyArgs(in, job, "-o", "json"), &out); err != nil {
		t.Fatalf("why %d: %v", job, err)
	}
	var r poolcli.WhyReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("why %d -o json does not decode (%v):\n%s", job, err, out.String())
	}
	return r
}

// waitDelivered waits until the double has made (or failed) every delivery it holds.
func (in *intake) waitDelivered() {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := in.github.WaitForDeliveries(ctx); err != nil {
		in.t.Fatalf("deliveries: %v", err)
	}
}
