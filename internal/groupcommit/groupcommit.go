// Package groupcommit hands items bound for the same workflow to Temporal in shared signals: one
// signal carries every item for that workflow that was queued while the previous signal was in
// flight (or, when paced, within the pace). A signal costs a Temporal round trip, a billable
// action and a write to the target's history whatever it carries, so under a flood the cost per
// item falls with the flood; a lone item is sent at once, with no linger.
//
// What it promises each caller of Commit:
//   - Commit returns nil only after Temporal accepted the signal that carries the item, so the
//     item is durable in the target's history;
//   - when that signal fails, every item it carried gets its error;
//   - per key, items are signalled in the order Commit was called, at most Options.MaxBatch per
//     signal, one signal in flight at a time (per process: several processes have no order
//     between them), and with Options.Pace at most one signal a pace;
//   - a caller whose context ends first is answered with the context's error, but its item is
//     still signalled: a slow Temporal is no reason to drop it. Each signal has its own deadline,
//     Options.Hold after its oldest item was queued, and an item that waited that long leaves
//     the queue unsent (its caller gave up long before), so an outage cannot grow a queue for
//     ever. Targets must therefore take an item delivered twice (a caller that retried) as once.
package groupcommit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sender signals one batch of items to the workflow of one key.
type Sender[T any] func(ctx context.Context, key string, items []T) error

// Options shape a Queue.
type Options struct {
	// MaxBatch bounds the items of one signal (Temporal's payload limit).
	MaxBatch int
	// Hold bounds how long an item is kept for a signal after it was queued.
	Hold time.Duration
	// Pace, when set, is the least time between the start of two signals to one key: the
	// items that arrive meanwhile wait for the next. Zero: the next signal leaves as soon as
	// the previous one returned.
	Pace time.Duration
	// Observe, when set, is told of each signal: how many items it carried, and its error.
	Observe func(items int, err error)
}

// Queue is a group commit over keys (one key per target workflow). It is safe for concurrent use.
type Queue[T any] struct {
	send Sender[T]
	opts Options

	mu sync.Mutex
	// keys holds the queue of each key with items waiting or a signal in flight; an idle key
	// has no entry, so keys that come and go leave nothing behind.
	keys map[string]*keyQueue[T]
}

// keyQueue is one key's items waiting for the next signal. While sending is set a goroutine of
// sendQueued owns the key's signals; it ends when it finds the queue empty.
type keyQueue[T any] struct {
	waiting []*pending[T]
	sending bool
}

// pending is one caller's item until its signal's outcome is known.
type pending[T any] struct {
	item T
	// queued is when Commit queued it: the signal carrying it must end by queued + Hold.
	queued time.Time
	// outcome receives the error of the signal that carried the item (nil: accepted); it has
	// room for that one value, so the sender never waits for a caller that gave up.
	outcome chan error
}

// New returns a queue that signals with send.
func New[T any](send Sender[T], opts Options) *Queue[T] {
	return &Queue[T]{send: send, opts: opts, keys: map[string]*keyQueue[T]{}}
}

// Commit queues the item for the key's workflow and waits until a signal carrying it was
// accepted or failed, or ctx ends (see the package comment for what each answer means).
func (g *Queue[T]) Commit(ctx context.Context, key string, item T) error {
	p := &pending[T]{item: item, queued: time.Now(), outcome: make(chan error, 1)}
	g.mu.Lock()
	q := g.keys[key]
	if q == nil {
		q = &keyQueue[T]{}
		g.keys[key] = q
	}
	q.waiting = append(q.waiting, p)
	if !q.sending {
		q.sending = true
		go g.sendQueued(key, q)
	}
	g.mu.Unlock()

	select {
	case err := <-p.outcome:
		return err
	case <-ctx.Done():
	}
	// The caller's time is up. If its signal's answer came in the same instant, it is the
	// true answer; otherwise the item stays queued or in flight and may still arrive.
	select {
	case err := <-p.outcome:
		return err
	default:
		return ctx.Err()
	}
}

// Waiting lists the key's queued items, in queue order, and whether a sender is at work for it.
func (g *Queue[T]) Waiting(key string) (items []T, busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.keys[key]
	if q == nil {
		return nil, false
	}
	for _, p := range q.waiting {
		items = append(items, p.item)
	}
	return items, q.sending
}

// sendQueued signals the key's queued items, a batch at a time, until none is left.
func (g *Queue[T]) sendQueued(key string, q *keyQueue[T]) {
	var pace *rate.Limiter
	if g.opts.Pace > 0 {
		pace = rate.NewLimiter(rate.Every(g.opts.Pace), 1)
	}
	for {
		if pace != nil {
			_ = pace.Wait(context.Background()) // cannot fail: no deadline, one token a pace
		}
		batch := g.nextBatch(key, q)
		if len(batch) == 0 {
			return
		}
		items := make([]T, len(batch))
		for i, p := range batch {
			items[i] = p.item
		}
		ctx, cancel := context.WithDeadline(context.Background(), batch[0].queued.Add(g.opts.Hold))
		err := g.send(ctx, key, items)
		cancel()
		if g.opts.Observe != nil {
			g.opts.Observe(len(items), err)
		}
		for _, p := range batch {
			p.outcome <- err
		}
	}
}

// nextBatch takes the oldest waiting items, at most a signal's worth, leaving out those that
// waited past the hold (their callers gave up). With nothing left it retires the queue (and
// the goroutine calling it), under the same lock Commit queues under, so no item is left
// without a sender.
func (g *Queue[T]) nextBatch(key string, q *keyQueue[T]) []*pending[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	var batch []*pending[T]
	taken, now := 0, time.Now()
	for _, p := range q.waiting {
		if len(batch) == g.opts.MaxBatch {
			break
		}
		taken++
		if now.Before(p.queued.Add(g.opts.Hold)) {
			batch = append(batch, p)
		} else {
			p.outcome <- context.DeadlineExceeded
		}
	}
	clear(q.waiting[:taken]) // the queue's array must not keep answered callers alive
	q.waiting = q.waiting[taken:]
	if len(batch) == 0 { // then nothing is left either: only a full batch stops the loop early
		q.sending = false
		delete(g.keys, key)
	}
	return batch
}
