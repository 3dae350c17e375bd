package webhook

import (
	"context"
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
//   - a delivery whose context ends first is answered with the context's error (503), but its
//     event is still signalled: a slow Temporal is no reason to leave a job unknown to its pool
//     until GitHub's redelivery. Each signal has its own deadline,
//     workflows.WebhookWindowSignalTimeout after its oldest event was queued, and an event that
//     waited that long leaves the queue unsent (its delivery was refused long before). The
//     window and the pool count a job's action once however often it is delivered (by job id
//     and action, and by delivery id), so the redelivery of a refused delivery whose event
//     arrived after all changes nothing.
type groupCommit struct {
	send batchSender
	// hold bounds how long an event is kept for a signal after it was queued
	// (workflows.WebhookWindowSignalTimeout; tests shorten it).
	hold    time.Duration
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
	// queued is when commit queued it: the signal carrying it must end by queued + hold.
	queued time.Time
	// outcome receives the error of the signal that carried the event (nil: accepted); it
	// has room for that one value, so the sender never waits for a delivery that gave up.
	outcome chan error
}

func newGroupCommit(send batchSender, hold time.Duration, m *Metrics) *groupCommit {
	return &groupCommit{send: send, hold: hold, metrics: m, windows: map[string]*windowQueue{}}
}

// commit queues the event for the pool's window and waits until a signal carrying it was
// accepted or failed, or ctx ends (see groupCommit for what each answer means).
func (g *groupCommit) commit(ctx context.Context, pool string, ev workflows.WorkflowJobEvent) error {
	p := &pendingEvent{event: ev, queued: time.Now(), outcome: make(chan error, 1)}
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
	// The delivery's time is up. If its signal's answer came in the same instant, it is the
	// true answer; otherwise the event stays queued or in flight and may still arrive.
	select {
	case err := <-p.outcome:
		return err
	default:
		return ctx.Err()
	}
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
		ctx, cancel := context.WithDeadline(context.Background(), batch[0].queued.Add(g.hold))
		err := g.send(ctx, pool, events)
		cancel()
		g.metrics.observeWindowSignal(len(events), err)
		for _, p := range batch {
			p.outcome <- err
		}
	}
}

// nextBatch takes the oldest waiting events, at most a signal's worth, leaving out those that
// waited past the hold (their deliveries were refused; GitHub's redelivery carries them). With
// nothing left it retires the queue (and the goroutine calling it), under the same lock commit
// queues under, so no event is left without a sender.
func (g *groupCommit) nextBatch(pool string, q *windowQueue) []*pendingEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	var batch []*pendingEvent
	taken, now := 0, time.Now()
	for _, p := range q.waiting {
		if len(batch) == workflows.WorkflowJobsSignalMaxEvents {
			break
		}
		taken++
		if now.Before(p.queued.Add(g.hold)) {
			batch = append(batch, p)
		} else {
			p.outcome <- context.DeadlineExceeded
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
