package githubdouble

import (
	"context"
	"net/http"
	"testing"
)

// During an outage the named routes answer 502 with GitHub's error shape, spend no budget and
// are counted; other routes answer as usual; after it, everything does.
func TestOutageFailsTheNamedRoutesUntilItEnds(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	cfg, err := w.jit(ctx, c, "acme", "pool-a-1", "linux")
	if err != nil {
		t.Fatal(err)
	}
	id := cfg.GetRunner().GetID()
	const getRoute = "GET /orgs/{org}/actions/runners/{runner_id}"
	w.StartOutage(Outage{Routes: []string{getRoute}})
	_, resp, err := c.Actions.GetOrganizationRunner(ctx, "acme", id)
	if got := statusOf(err); got != http.StatusBadGateway {
		t.Fatalf("GET runner during the outage: %v, want 502", err)
	}
	if resp.Header.Get("X-RateLimit-Remaining") != "" {
		t.Errorf("a 502 from GitHub's front end carries no rate-limit headers, got %q", resp.Header.Get("X-RateLimit-Remaining"))
	}
	if _, _, err := c.Actions.ListOrganizationRunners(ctx, "acme", nil); err != nil {
		t.Errorf("listing, not in the outage: %v", err)
	}
	if n := w.Calls()[CallKey{Route: getRoute, Status: http.StatusBadGateway}]; n != 1 {
		t.Errorf("counted %d 502 answers of %s, want 1", n, getRoute)
	}

	w.StartOutage(Outage{Status: http.StatusServiceUnavailable}) // every route
	if _, _, err := c.Actions.ListOrganizationRunners(ctx, "acme", nil); statusOf(err) != http.StatusServiceUnavailable {
		t.Errorf("listing during an outage of every route: %v, want 503", err)
	}
	w.EndOutage()
	if r, _, err := c.Actions.GetOrganizationRunner(ctx, "acme", id); err != nil || r.GetName() != "pool-a-1" {
		t.Errorf("GET runner after the outage: %v, %v", r, err)
	}
}
