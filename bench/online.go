package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// simulatorOnlineMessage is the line the runner simulator logs, with the runner's name, at the
// moment its runner has connected to the GitHub double (localworld/simulator, connect). Nothing
// else in the test world knows that moment: GitHub sends no webhook when a runner comes
// online, and the double forgets an ephemeral runner with its job. The smoke test fails if
// the line stops arriving.
const simulatorOnlineMessage = "runner online"

// onlineTimes is a slog handler that records when each runner came online, from the
// simulator's log records (their Time is taken when the line is logged), and passes warnings
// and errors of the world's parts on to next.
type onlineTimes struct {
	attrs []slog.Attr
	next  slog.Handler
	sink  *onlineSink
}

type onlineSink struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newOnlineTimes(next slog.Handler) *onlineTimes {
	return &onlineTimes{next: next, sink: &onlineSink{at: map[string]time.Time{}}}
}

// Enabled takes info lines (the online line is one) and whatever next wants.
func (h *onlineTimes) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo || h.next.Enabled(ctx, level)
}

// Handle records the online line and forwards what next wants.
func (h *onlineTimes) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == simulatorOnlineMessage {
		if name := h.runner(r); name != "" {
			h.sink.mu.Lock()
			if _, seen := h.sink.at[name]; !seen {
				h.sink.at[name] = r.Time
			}
			h.sink.mu.Unlock()
		}
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.WithAttrs(h.attrs).Handle(ctx, r)
	}
	return nil
}

// runner finds the record's runner attribute, set by the simulator's logger.With.
func (h *onlineTimes) runner(r slog.Record) string {
	name := ""
	for _, a := range h.attrs {
		if a.Key == "runner" {
			name = a.Value.String()
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "runner" {
			name = a.Value.String()
		}
		return true
	})
	return name
}

// WithAttrs keeps the attributes so Handle can find the runner name.
func (h *onlineTimes) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &onlineTimes{attrs: append(slices.Clip(h.attrs), attrs...), next: h.next, sink: h.sink}
}

// WithGroup is not used by the world's parts; attributes stay ungrouped.
func (h *onlineTimes) WithGroup(string) slog.Handler { return h }

// at returns when the runner came online.
func (h *onlineTimes) at(runner string) (time.Time, bool) {
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	t, ok := h.sink.at[runner]
	return t, ok
}
