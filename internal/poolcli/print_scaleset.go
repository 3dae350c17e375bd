package poolcli

import (
	"fmt"
	"io"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// printScaleSet writes a scale-set pool's lines: its set, the listener's session and last
// message, and GitHub's statistics beside the jobs the pool counts.
func printScaleSet(w io.Writer, s *workflows.PoolScaleSetState) {
	if s == nil {
		return
	}
	listener := "not running"
	if s.Listening {
		listener = "running"
	}
	at := "none yet"
	if !s.MessageAt.IsZero() {
		at = fmt.Sprintf("%d at %s", s.Ledger.LastMessageID, s.MessageAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  scale set   id %d, listener %s, session %q, last message %s, created again %d time(s)\n",
		s.ScaleSetID, listener, s.SessionID, at, s.Recreated)
	st := s.Statistics
	fmt.Fprintf(w, "  set jobs    %d waiting, %d running (GitHub: %d assigned, %d running; runners %d registered, %d busy, %d idle)\n",
		len(s.Ledger.Waiting), len(s.Ledger.Running), st.AssignedJobs, st.RunningJobs, st.RegisteredRunners, st.BusyRunners, st.IdleRunners)
	if s.Error != "" {
		fmt.Fprintf(w, "  set error   %s\n", s.Error)
	}
}
