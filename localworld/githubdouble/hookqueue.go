package githubdouble

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// hookQueue delivers webhooks asynchronously from a bounded queue. It has its own mutex; the
// lock order is Server.mu, then hookQueue.mu, never the reverse.
type hookQueue struct {
	now      func() time.Time
	log      *slog.Logger
	app      *AppConfig
	workers  int
	capacity int
	client   *http.Client
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	url      string
	secret   string
	rng      *rand.Rand
	records  []Delivery
	pending  []int // indexes into records, next first
	held     []int
	holding  bool
	inflight int
	// drop is the share of workflow_job deliveries failed without being sent (DropWebhooks).
	drop    float64
	changed chan struct{} // closed whenever the queue changes
}

func newHookQueue(cfg Config) *hookQueue {
	ctx, cancel := context.WithCancel(context.Background())
	return &hookQueue{
		now: cfg.Now, log: cfg.Logger, app: cfg.App, workers: cfg.WebhookWorkers,
		capacity: cfg.WebhookQueueSize, client: &http.Client{}, ctx: ctx, cancel: cancel,
		url: cfg.WebhookURL, secret: cfg.WebhookSecret,
		rng:     rand.New(rand.NewPCG(cfg.WebhookSeed, cfg.WebhookSeed)),
		changed: make(chan struct{}),
	}
}

func (hq *hookQueue) start() {
	for range hq.workers {
		hq.wg.Add(1)
		go hq.work()
	}
}

func (hq *hookQueue) stop() {
	hq.cancel()
	hq.wg.Wait()
}

// notify wakes workers and waiters. Callers hold hq.mu.
func (hq *hookQueue) notify() {
	close(hq.changed)
	hq.changed = make(chan struct{})
}

func (hq *hookQueue) config() (url, secret string) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return hq.url, hq.secret
}

func (hq *hookQueue) setURL(url string) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.url = url
}

func (hq *hookQueue) setSecret(secret string) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.secret = secret
}

// enqueue records a delivery and queues it (or parks it while holding). Without a webhook URL
// nothing is recorded, as GitHub records nothing without a hook. It returns the delivery id.
func (hq *hookQueue) enqueue(d Delivery) string {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	if hq.url == "" {
		return ""
	}
	if d.ID == "" {
		d.ID = newUUID()
	}
	d.URL = hq.url
	if d.Event == "workflow_job" && hq.drop > 0 && hq.rng.Float64() < hq.drop {
		d.Done, d.Error, d.DeliveredAt = true, errDropped, hq.now()
		hq.records = append(hq.records, d)
		return d.ID
	}
	hq.records = append(hq.records, d)
	hq.queue(len(hq.records) - 1)
	return d.ID
}

// queue puts a recorded delivery on the queue; a full queue fails the delivery. Callers hold
// hq.mu.
func (hq *hookQueue) queue(idx int) {
	switch {
	case hq.holding:
		hq.held = append(hq.held, idx)
	case len(hq.pending) >= hq.capacity:
		hq.records[idx].Done = true
		hq.records[idx].Error = "delivery queue full"
	default:
		hq.pending = append(hq.pending, idx)
		hq.notify()
	}
}

// work delivers queued webhooks until the queue stops.
func (hq *hookQueue) work() {
	defer hq.wg.Done()
	for {
		idx, d, secret, ok := hq.take()
		if !ok {
			return
		}
		status, err := hq.send(hq.ctx, d, secret)
		hq.mu.Lock()
		rec := &hq.records[idx]
		rec.Done, rec.StatusCode, rec.DeliveredAt = true, status, hq.now()
		if err != nil {
			rec.Error = err.Error()
			hq.log.Debug("webhook delivery failed", "deliveryID", d.ID, "error", err)
		}
		hq.inflight--
		hq.notify()
		hq.mu.Unlock()
	}
}

// take waits for the next queued delivery; ok is false once the queue stops.
func (hq *hookQueue) take() (idx int, d Delivery, secret string, ok bool) {
	hq.mu.Lock()
	for len(hq.pending) == 0 {
		changed := hq.changed
		hq.mu.Unlock()
		select {
		case <-changed:
		case <-hq.ctx.Done():
			return 0, Delivery{}, "", false
		}
		hq.mu.Lock()
	}
	defer hq.mu.Unlock()
	idx = hq.pending[0]
	hq.pending = hq.pending[1:]
	hq.inflight++
	return idx, hq.records[idx], hq.secret, true
}

func (hq *hookQueue) snapshot() []Delivery {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	out := slices.Clone(hq.records)
	for i := range out {
		out[i].Payload = slices.Clone(out[i].Payload)
	}
	return out
}

func (hq *hookQueue) redeliver(id string) error {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	if hq.url == "" {
		return fmt.Errorf("githubdouble: no webhook URL configured")
	}
	i := slices.IndexFunc(hq.records, func(d Delivery) bool { return d.ID == id })
	if i < 0 {
		return fmt.Errorf("githubdouble: unknown delivery %q", id)
	}
	orig := hq.records[i]
	hq.records = append(hq.records, Delivery{
		ID: orig.ID, Event: orig.Event, Action: orig.Action, JobID: orig.JobID,
		Redelivery: true, URL: hq.url, Payload: orig.Payload,
	})
	hq.queue(len(hq.records) - 1)
	return nil
}

// errDropped is the Error of a delivery DropWebhooks failed.
const errDropped = "dropped: the delivery failed (DropWebhooks)"

func (hq *hookQueue) setDrop(share float64) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.drop = share
}

func (hq *hookQueue) hold() {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.holding = true
}

func (hq *hookQueue) release(order ReleaseOrder) int {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	held := hq.held
	hq.held, hq.holding = nil, false
	switch order {
	case ReleaseReversed:
		slices.Reverse(held)
	case ReleaseShuffled:
		hq.rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
	}
	for _, idx := range held {
		hq.queue(idx)
	}
	return len(held)
}

func (hq *hookQueue) wait(ctx context.Context) error {
	for {
		hq.mu.Lock()
		idle := len(hq.pending) == 0 && hq.inflight == 0
		changed := hq.changed
		hq.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-hq.ctx.Done():
			return fmt.Errorf("githubdouble: server closed with deliveries pending")
		}
	}
}
