package githubdouble

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-github/v92/github"
)

// A runner at the first position of page 2 moves to page 1 when a runner of page 1 is removed
// after page 1 was read: a reader of both pages never sees it, as on GitHub.
func TestRemovalBetweenPageReadsSkipsTheRunnerAtTheBoundary(t *testing.T) {
	w := startWorld(t, Config{})
	var names []string
	for i := range 101 {
		names = append(names, fmt.Sprintf("fleet-%03d", i))
	}
	if err := w.RegisterRunners(OrgScope("acme"), []string{"self-hosted"}, names...); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterRunners(OrgScope("acme"), nil, "fleet-000"); err == nil {
		t.Error("a second runner of the same name was registered")
	}
	done := w.RemoveAfterListPage(OrgScope("ACME"), 1, "fleet-000")
	c := w.client(testToken, nil)
	opts := &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 100}}
	seen := map[string]bool{}
	for {
		page, resp, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runners {
			seen[r.GetName()] = true
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	select {
	case <-done:
	default:
		t.Fatal("the armed removal did not happen")
	}
	if seen["fleet-100"] {
		t.Error("the runner that moved across the page boundary was listed")
	}
	if len(seen) != 100 {
		t.Errorf("listed %d runners, want 100 (the removed one read on page 1, the moved one on neither)", len(seen))
	}
}
