package activities

import (
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
)

// testClock is a clock a test moves by hand (the double's Config.Now).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// nextRetryDelay is the retry delay an application error asks for (0 if none).
func nextRetryDelay(err error) time.Duration {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.NextRetryDelay()
	}
	return 0
}
