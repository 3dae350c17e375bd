package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// throughputPools are figure 6's pools. They have no runners (maxReplicas 0), so the
// deliveries only reserve capacity: every acknowledged queued event must show as exactly one
// reservation afterwards, and nothing but the webhook path costs anything.
var throughputPools = []string{"tput-a", "tput-b"}

// signedDelivery is one webhook as GitHub would send it.
type signedDelivery struct {
	id, signature string
	body          []byte
}

// sent is the load generator's record of one delivery.
type sent struct {
	status int
	took   time.Duration
	// began is when the request left, done when its answer had been read.
	began, done time.Time
}

// throughput measures figure 6: signed queued workflow_job deliveries offered to the intake at
// a fixed rate for a fixed time (open loop: a slow answer does not slow the offer), then the
// pools' reservations, GitHub calls and Temporal histories that the events caused.
func (e *env) throughput(ctx context.Context) (ThroughputResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.PhaseTimeout)
	defer cancel()
	count := int(float64(e.opts.Rate) * e.opts.LoadDuration.Seconds())
	deliveries, err := makeDeliveries(count)
	if err != nil {
		return ThroughputResult{}, err
	}
	ns, err := e.newNamespace(ctx, "throughput")
	if err != nil {
		return ThroughputResult{}, err
	}
	var specs []workflows.PoolSpec
	for _, p := range throughputPools {
		specs = append(specs, poolSpec(p, "org-"+p, ns, 0, 0))
	}
	if err := e.apply(ctx, specs...); err != nil {
		return ThroughputResult{}, err
	}
	defer e.terminatePools(context.Background(), throughputPools...)
	if err := e.intake.waitRoutable(ctx, throughputPools...); err != nil {
		return ThroughputResult{}, err
	}
	e.say("throughput: offering %d webhooks at %d/s", count, e.opts.Rate)
	e.world.GitHub.ResetCalls()
	start := time.Now()
	results := offer(ctx, e.intake.url, deliveries, e.opts.Rate)
	res := loadResult(results, start, e.opts.Rate)
	e.say("throughput: %s", pace(results))
	e.say("throughput: %d of %d acknowledged; waiting for the scale windows to close", res.Acked, res.Sent)
	if err := waitWindowsClosed(ctx, e.c, throughputPools); err != nil {
		return res, err
	}
	return res, e.throughputCost(ctx, &res, start)
}

// makeDeliveries has a second GitHub double, holding its webhooks, produce count queued
// workflow_job payloads for the throughput pools' organizations: the bytes GitHub's shape
// gives, which the benchmark then sends itself at its own pace.
func makeDeliveries(count int) ([]signedDelivery, error) {
	gh, err := githubdouble.Start(githubdouble.Config{WebhookURL: "http://127.0.0.1:9/not-sent", WebhookSecret: webhookSecret})
	if err != nil {
		return nil, err
	}
	defer gh.Close()
	gh.HoldWebhooks()
	for _, p := range throughputPools {
		if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "org-" + p + "/app"}); err != nil {
			return nil, err
		}
	}
	for i := range count {
		repo := "org-" + throughputPools[i%len(throughputPools)] + "/app"
		if _, err := gh.QueueJob(githubdouble.JobSpec{Repository: repo, Labels: jobLabels}); err != nil {
			return nil, err
		}
	}
	var out []signedDelivery
	for _, d := range gh.Deliveries() {
		out = append(out, signedDelivery{id: d.ID, body: d.Payload, signature: githubdouble.Sign(webhookSecret, d.Payload)})
	}
	if len(out) != count {
		return nil, fmt.Errorf("the payload double produced %d deliveries for %d jobs", len(out), count)
	}
	return out, nil
}

// offer sends delivery i at start + i/rate, each in its own goroutine, and waits for all.
func offer(ctx context.Context, url string, deliveries []signedDelivery, rate int) []sent {
	client := &http.Client{
		Timeout:   10 * time.Second, // GitHub's delivery timeout
		Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024},
	}
	defer client.CloseIdleConnections()
	results := make([]sent, len(deliveries))
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i, d := range deliveries {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() { results[i] = deliver(ctx, client, url, d) })
	}
	wg.Wait()
	return results
}

func deliver(ctx context.Context, c *http.Client, url string, d signedDelivery) sent {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.body))
	if err != nil {
		return sent{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "workflow_job")
	req.Header.Set("X-GitHub-Delivery", d.id)
	req.Header.Set("X-Hub-Signature-256", d.signature)
	begin := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return sent{took: time.Since(begin), began: begin, done: time.Now()}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return sent{status: resp.StatusCode, took: time.Since(begin), began: begin, done: time.Now()}
}

// loadResult summarises the answers: a 2xx is an acknowledgement; the rate is acknowledgements
// per second from the first send to the last answer.
func loadResult(results []sent, start time.Time, rate int) ThroughputResult {
	res := ThroughputResult{OfferedPerSecond: rate}
	var acks []time.Duration
	var last time.Time
	for _, r := range results {
		if r.done.IsZero() && r.status == 0 {
			continue // never sent: the phase ran out of time
		}
		res.Sent++
		if r.status/100 != 2 {
			res.Failed++
			continue
		}
		res.Acked++
		acks = append(acks, r.took)
		if r.done.After(last) {
			last = r.done
		}
	}
	res.AckTime = summarize(acks)
	if res.Acked > 0 {
		res.AckedPerSecond = round1(float64(res.Acked) / last.Sub(start).Seconds())
	}
	return res
}

// pace says whether the load generator held the offered rate (the sends' own spread, which a
// generator starved of CPU would stretch) and the rate at which acknowledgements came out
// between the first and the last. The figure's acked/s counts from the first send to the last
// answer, so even an intake that keeps up exactly scores a little under the offered rate: the
// last answer's ack time is counted as if it were load.
func pace(results []sent) string {
	var sends, acks []time.Time
	for _, r := range results {
		if !r.began.IsZero() {
			sends = append(sends, r.began)
		}
		if r.status/100 == 2 {
			acks = append(acks, r.done)
		}
	}
	return fmt.Sprintf("sent at %s; acknowledged at %s", rateOver(sends), rateOver(acks))
}

// rateOver is the rate of the instants between the first and the last, e.g. "999.8/s over 10.0 s".
func rateOver(instants []time.Time) string {
	if len(instants) < 2 {
		return "n/a"
	}
	first, last := slices.MinFunc(instants, time.Time.Compare), slices.MaxFunc(instants, time.Time.Compare)
	span := last.Sub(first).Seconds()
	if span <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f/s over %.2f s", float64(len(instants)-1)/span, span)
}

// throughputCost fills in the reservations (no event lost), the GitHub calls and the Temporal
// cost per event.
func (e *env) throughputCost(ctx context.Context, res *ThroughputResult, start time.Time) error {
	for _, p := range throughputPools {
		st, err := e.status(ctx, p)
		if err != nil {
			return err
		}
		res.Reserved += st.Reservations
	}
	res.Lost = res.Acked - res.Reserved
	res.GitHubCalls = e.world.GitHub.TotalCalls()
	res.GitHubCallsPerEvent = ratio(res.GitHubCalls, res.Acked)
	var err error
	if res.Temporal, err = historyCost(ctx, e.c, idQuery(workflows.ScaleWindowWorkflowID, throughputPools), start, nil); err != nil {
		return err
	}
	pools, err := historyCost(ctx, e.c, idQuery(workflows.PoolWorkflowID, throughputPools), start, nil)
	if err != nil {
		return err
	}
	res.Temporal.add(pools)
	res.EventsPerEvent = ratio(res.Temporal.Events, res.Acked)
	res.ActionsPerEvent = ratio(res.Temporal.Actions.Total(), res.Acked)
	return nil
}

// waitWindowsClosed waits until no scale window of the pools is open, so every event reached
// its pool.
func waitWindowsClosed(ctx context.Context, c client.Client, pools []string) error {
	query := idQuery(workflows.ScaleWindowWorkflowID, pools) + ` AND ExecutionStatus = "Running"`
	return poll(ctx, "scale windows to close", func() (bool, error) {
		n, err := c.CountWorkflow(ctx, countRequest(query))
		return err == nil && n.GetCount() == 0, err
	})
}
