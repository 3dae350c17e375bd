package githubdouble

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-github/v92/github"
)

// A slow GitHub carries a call out at once and answers late: a client that gives up first has
// registered its runner all the same, and one that waits gets the answer.
func TestSlowAnswersCarryTheCallOutAndAnswerLate(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	w.SetSlowAnswers(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := github.CreateJITConfigRequest{Name: "late", RunnerGroupID: 1, Labels: []string{"linux"}}
	if _, _, err := c.Actions.CreateOrgJITConfig(ctx, "acme", req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a client that gives up before the answer: err = %v, want its deadline", err)
	}
	found := false
	for _, r := range w.Runners() {
		found = found || r.Name == "late"
	}
	if !found {
		t.Fatal("the registration was not carried out although its answer came late")
	}
	began := time.Now()
	if _, _, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", nil); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("answered after %s, want it held back 300ms", waited)
	}
	w.SetSlowAnswers(0)
	if _, _, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", nil); err != nil {
		t.Fatal(err)
	}
}
