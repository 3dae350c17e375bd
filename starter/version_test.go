package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/runnerflow/runnerflow"
)

// `starter --version` prints the release the VERSION file names.
func TestStarterVersionPrintsTheRelease(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != runnerflow.Version() || got == "" {
		t.Errorf("starter --version printed %q, want the release %q", got, runnerflow.Version())
	}
}
