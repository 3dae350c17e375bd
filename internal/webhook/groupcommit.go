package webhook

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// groupCommit hands workflow_job events to the pools' scale windows, one signal for all the
// deliveries to the same window that arrive while its previous signal is in flight. A signal
// costs a Temporal round trip and a billable action whatever it carries, so under a flood the
// cost per event falls with the flood; a lone delivery is sent at once, with no linger.
//
// What it promises each delivery:
//   - commit returns nil only after Temporal accepted the signal that carries the event, so a
//     delivery answered 202 is durable in the window's history;
//   - when that signal fails, every delivery it carried gets its error (503 or 500, as one
//     delivery's own signal failing does);
//   - per window, events are signalled in the order commit was called, at most
//     workflows.WorkflowJobsSignalMaxEvents per signal, one signal in flight at a time (per
//     starter process: replicas have no order between them, as GitHub's deliveries have none);
//   - a delivery whose context ends while it waits is answered with the context's error (503).
//     If its event had not left yet it is taken out of the queue and never sent: GitHub shows
//     the delivery as failed and nothing of it reaches the window. If it had already left with
//     a batch it may still arrive; that is safe, because the window and the pool count a job's
//     action once however often it is delivered (by job id and action, and by delivery id), so
//     GitHub's redelivery of the 503 changes nothing.
type groupCommit struct {
	send    batchSender
	timeout time.Duration
	metrics *Metrics

	mu sync.Mutex
	// windows holds the queue of each window with events waiting or a signal in flight; an
	// idle window has no entry, so pools that come and go leave nothing behind.
	windows map[string]*windowQueue
}

// batchSender signals one batch of events to one pool's scale window.
type batchSender func(ctx context.Context, pool string, events []workflows.WorkflowJobEvent) error

// windowQueue is one window's events waiting for the next signal. While sending is set a
// goroutine of sendQueued owns the window's signals; it ends when it finds the queue empty.
type windowQueue struct {
	waiting []*pendingEvent
	sending bool
}

// pendingEvent is one delivery's event until its signal's outcome is known.
type pendingEvent struct {
	event workflows.WorkflowJobEvent
	// request is the delivery's context: its deadline bounds the signal carrying the event,
	// and an event whose request ended before its batch left is left out.
	request context.Context
	// outcome receives the error of the signal that carried the event (nil: accepted); it
	// has room for that one value, so the sender never waits for a delivery that gave up.
	outcome chan error
}

func newGroupCommit(send batchSender, timeout time.Duration, m *Metrics) *groupCommit {
	return &groupCommit{send: send, timeout: timeout, metrics: m, windows: map[string]*windowQueue{}}
}

// commit queues the event for the pool's window and waits until a signal carrying it was
// accepted or failed, or ctx ends (see groupCommit for what each answer means).
func (g *groupCommit) commit(ctx context.Context, pool string, ev workflows.WorkflowJobEvent) error {
	p := &pendingEvent{event: ev, request: ctx, outcome: make(chan error, 1)}
	g.mu.Lock()
	q := g.windows[pool]
	if q == nil {
		q = &windowQueue{}
		g.windows[pool] = q
	}
	q.waiting = append(q.waiting, p)
	if !q.sending {
		q.sending = true
		go g.sendQueued(pool, q)
	}
	g.mu.Unlock()

	select {
	case err := <-p.outcome:
		return err
	case <-ctx.Done():
	}
	if g.withdraw(q, p) {
		return ctx.Err()
	}
	// The event left with a batch. If that batch's answer came in the same instant, it is the
	// true answer; otherwise the delivery's time is up, whatever the batch's fate.
	select {
	case err := <-p.outcome:
		return err
	default:
		return ctx.Err()
	}
}

// withdraw takes p out of the queue if it is still waiting there, and reports whether it was.
func (g *groupCommit) withdraw(q *windowQueue, p *pendingEvent) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(q.waiting, p)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// sendQueued signals the window's queued events, a batch at a time, until none is left.
func (g *groupCommit) sendQueued(pool string, q *windowQueue) {
	for {
		batch := g.nextBatch(pool, q)
		if len(batch) == 0 {
			return
		}
		events := make([]workflows.WorkflowJobEvent, len(batch))
		for i, p := range batch {
			events[i] = p.event
		}
		ctx, cancel := context.WithDeadline(context.Background(), g.batchDeadline(batch))
		err := g.send(ctx, pool, events)
		cancel()
		g.metrics.observeWindowSignal(len(events), err)
		for _, p := range batch {
			p.outcome <- err
		}
	}
}

// nextBatch takes the oldest waiting events, at most a signal's worth, leaving out those whose
// delivery has already given up. With nothing left it retires the queue (and the goroutine
// calling it), under the same lock commit queues under, so no event is left without a sender.
func (g *groupCommit) nextBatch(pool string, q *windowQueue) []*pendingEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	var batch []*pendingEvent
	taken := 0
	for _, p := range q.waiting {
		if len(batch) == workflows.WorkflowJobsSignalMaxEvents {
			break
		}
		taken++
		if p.request.Err() == nil {
			batch = append(batch, p)
		}
	}
	clear(q.waiting[:taken]) // the queue's array must not keep answered deliveries alive
	q.waiting = q.waiting[taken:]
	if len(batch) == 0 { // then nothing is left either: only a full batch stops the loop early
		q.sending = false
		delete(g.windows, pool)
	}
	return batch
}

// batchDeadline bounds a batch's signal by the last deadline among its deliveries: until then
// someone waits for the answer. A delivery without a deadline gets the handler's timeout.
func (g *groupCommit) batchDeadline(batch []*pendingEvent) time.Time {
	var last time.Time
	for _, p := range batch {
		d, ok := p.request.Deadline()
		if !ok {
			d = time.Now().Add(g.timeout)
		}
		if d.After(last) {
			last = d
		}
	}
	return last
}
