package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/runnerflow/runnerflow/internal/webhook"
)

// intake is the starter's webhook intake (internal/webhook, as `starter serve` runs it) on a
// loopback HTTP server, with a wrapper that notes when each delivery arrived.
type intake struct {
	handler *webhook.Handler
	url     string
	srv     *http.Server
	cancel  context.CancelFunc

	mu       sync.Mutex
	received map[string]time.Time // by X-GitHub-Delivery; the first arrival counts
	// answers counts the intake's answers by status (the 503s an operator sees).
	answers answerCounter
}

func startIntake(cfg webhook.Config, logger *slog.Logger) (*intake, error) {
	h, err := webhook.NewHandler(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("intake listener: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &intake{handler: h, url: "http://" + ln.Addr().String() + "/webhook", cancel: cancel, received: map[string]time.Time{}}
	in.srv = &http.Server{
		Handler: in.noteArrival(in.answers.count(h.Routes())), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go h.Pools().Run(ctx)
	go func() {
		if err := in.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("intake stopped serving", "error", err)
		}
	}()
	return in, nil
}

func (in *intake) noteArrival(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		if id := r.Header.Get("X-GitHub-Delivery"); id != "" {
			in.mu.Lock()
			if _, seen := in.received[id]; !seen {
				in.received[id] = now
			}
			in.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// receivedAt is when the delivery first reached the intake.
func (in *intake) receivedAt(deliveryID string) (time.Time, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, ok := in.received[deliveryID]
	return t, ok
}

// waitRoutable refreshes the pool table until every pool is in it.
func (in *intake) waitRoutable(ctx context.Context, pools ...string) error {
	return poll(ctx, fmt.Sprintf("pools %v routable", pools), func() (bool, error) {
		if err := in.handler.Pools().Refresh(ctx); err != nil {
			return false, err
		}
		have := map[string]bool{}
		for _, p := range in.handler.Pools().Pools() {
			have[p.Name] = true
		}
		for _, p := range pools {
			if !have[p] {
				return false, nil
			}
		}
		return true, nil
	})
}

func (in *intake) close() {
	in.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = in.srv.Shutdown(ctx)
}

// poll checks cond every 200 ms until it holds, fails, or ctx ends; what names the awaited
// state in the error.
func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	return pollEvery(ctx, 200*time.Millisecond, what, cond)
}

// pollEvery is poll at another pace, for conditions that are costly to check.
func pollEvery(ctx context.Context, interval time.Duration, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}
