package poolcli

import (
	"fmt"
	"io"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// printPull writes the pull's line of a pool's status: what it last read and what that cost.
func printPull(w io.Writer, p *workflows.PullStatus) {
	if p == nil {
		return
	}
	at := "not yet"
	if !p.At.IsZero() {
		at = p.At.UTC().Format(time.RFC3339)
	}
	seen := fmt.Sprintf("%d queued, %d in progress", p.Queued, p.InProgress)
	if p.Metric == workflows.PullMetricBusyPercentage {
		seen = fmt.Sprintf("target %d", p.Target)
	}
	fmt.Fprintf(w, "  pull        %s read %s: %s; %d call(s), %d answered 304\n", p.Metric, at, seen, p.Calls, p.NotModified)
	if p.Error != "" {
		fmt.Fprintf(w, "  pull error  %s\n", p.Error)
	}
}
