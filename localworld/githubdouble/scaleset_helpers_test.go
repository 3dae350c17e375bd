package githubdouble

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/hashicorp/go-retryablehttp"
)

// scaleSetWorld is the standard world with a short message-queue poll, so a poll that finds
// nothing answers 202 soon.
func scaleSetWorld(t *testing.T, cfg Config) *world {
	t.Helper()
	if cfg.ScaleSetPollWait == 0 {
		cfg.ScaleSetPollWait = 100 * time.Millisecond
	}
	return startWorld(t, cfg)
}

// statusLog records the status of every answer the scale-set client receives, so a test can
// tell a 409 from a 404 (the client's errors carry statuses only as text).
type statusLog struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header // of the last answer
}

func (l *statusLog) last() (int, http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.statuses) == 0 {
		return 0, nil
	}
	return l.statuses[len(l.statuses)-1], l.header
}

// scaleSetClient returns the official client for a configuration path of the double ("acme",
// "acme/app", "enterprises/megacorp") with the test token. It never retries on its own, and
// records answers in the returned log.
func (w *world) scaleSetClient(configPath string) (*scaleset.Client, *statusLog) {
	w.t.Helper()
	log := &statusLog{}
	rc := retryablehttp.NewClient()
	rc.RetryMax = 0
	rc.Logger = nil
	// A response hook, not CheckRetry: the client replaces the CheckRetry of the client it is
	// given when it fetches its admin token.
	rc.ResponseLogHook = func(_ retryablehttp.Logger, resp *http.Response) {
		log.mu.Lock()
		log.statuses = append(log.statuses, resp.StatusCode)
		log.header = resp.Header.Clone()
		log.mu.Unlock()
	}
	c, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL:     w.URL() + configPath,
		PersonalAccessToken: testToken,
		SystemInfo:          scaleset.SystemInfo{System: "runnerflow-test", Subsystem: "double"},
	}, scaleset.WithRetryableHTTPClint(rc))
	if err != nil {
		w.t.Fatalf("scaleset.NewClientWithPersonalAccessToken: %v", err)
	}
	return c, log
}

// createSet creates a scale set in the default group with the given labels.
func createSet(t *testing.T, c *scaleset.Client, name string, labels ...string) *scaleset.RunnerScaleSet {
	t.Helper()
	in := &scaleset.RunnerScaleSet{Name: name, RunnerGroupID: 1}
	for _, l := range labels {
		in.Labels = append(in.Labels, scaleset.Label{Name: l})
	}
	set, err := c.CreateRunnerScaleSet(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateRunnerScaleSet(%s): %v", name, err)
	}
	return set
}

// openSession opens the set's message session.
func openSession(t *testing.T, c *scaleset.Client, setID int, owner string) *scaleset.MessageSessionClient {
	t.Helper()
	sc, err := c.MessageSessionClient(t.Context(), setID, owner)
	if err != nil {
		t.Fatalf("MessageSessionClient: %v", err)
	}
	return sc
}

// nextMessage polls until a message comes (each empty poll is a 202 after the short wait),
// reporting a capacity of 10.
func nextMessage(t *testing.T, sc *scaleset.MessageSessionClient, lastID int) *scaleset.RunnerScaleSetMessage {
	t.Helper()
	return nextMessageWithCapacity(t, sc, lastID, 10)
}

// nextMessageWithCapacity polls until a message comes, reporting capacity.
func nextMessageWithCapacity(t *testing.T, sc *scaleset.MessageSessionClient, lastID, capacity int) *scaleset.RunnerScaleSetMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		msg, err := sc.GetMessage(ctx, lastID, capacity)
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		if msg != nil {
			return msg
		}
	}
	t.Fatal("no message came")
	return nil
}

// jobIDs lists the runner request ids of a message's job messages by type.
func jobIDs(msg *scaleset.RunnerScaleSetMessage) (assigned, started, completed []int64) {
	for _, m := range msg.JobAssignedMessages {
		assigned = append(assigned, m.RunnerRequestID)
	}
	for _, m := range msg.JobStartedMessages {
		started = append(started, m.RunnerRequestID)
	}
	for _, m := range msg.JobCompletedMessages {
		completed = append(completed, m.RunnerRequestID)
	}
	return assigned, started, completed
}
