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
	acquired := ""
	if s.AcquiredSince > 0 {
		acquired = fmt.Sprintf(" + %d acquired since", s.AcquiredSince)
	}
	fmt.Fprintf(w, "  set jobs    %d waiting, %d running (GitHub: %d assigned%s, %d running; runners %d registered, %d busy, %d idle)\n",
		len(s.Ledger.Waiting), len(s.Ledger.Running), st.AssignedJobs, acquired, st.RunningJobs, st.RegisteredRunners, st.BusyRunners, st.IdleRunners)
	if s.NameOnlyLabels {
		fmt.Fprintf(w, "  set labels  GitHub kept only its name as its label (GHES without custom scale-set labels): jobs reach it by runs-on naming the set\n")
	}
	if !s.ExcessSince.IsZero() {
		fmt.Fprintf(w, "  set ledger  %d jobs over GitHub's assigned count since %s; let go after %s\n",
			s.Ledger.Jobs()-st.AssignedJobs-s.AcquiredSince, s.ExcessSince.UTC().Format(time.RFC3339), workflows.ScaleSetLedgerExcessHold)
	}
	for _, l := range s.Left {
		fmt.Fprintf(w, "  set left    id %d, deleted once its %d runner(s) have ended\n", l.ScaleSetID, len(l.Runners))
	}
	if s.Error != "" {
		fmt.Fprintf(w, "  set error   %s\n", s.Error)
	}
}
