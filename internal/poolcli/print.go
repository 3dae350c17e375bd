package poolcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/runnerflow/runnerflow/workflows"
)

// discardLogger keeps the SDK's own logging out of a command's output.
func discardLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runnerStates is the order states are shown in.
var runnerStates = []workflows.RunnerState{
	workflows.RunnerPending, workflows.RunnerRegistering, workflows.RunnerIdle, workflows.RunnerBusy, workflows.RunnerDraining,
}

func stateSummary(counts map[workflows.RunnerState]int) string {
	var parts []string
	for _, s := range runnerStates {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// printStatus writes one pool's status for a person.
func printStatus(w io.Writer, st workflows.PoolStatus) {
	mode := string(st.Mode)
	if st.ModeReason != "" {
		mode += " (" + st.ModeReason + ")"
	}
	fmt.Fprintf(w, "Pool %s  %s  labels %s  mode %s\n", st.Name, st.Spec.Scope(), strings.Join(st.Spec.Labels, ","), mode)
	fmt.Fprintf(w, "  bounds      min %d, max %d, minIdle %d%s\n", st.Bounds.Min, st.Bounds.Max, st.Bounds.MinIdle, boundsSource(st))
	fmt.Fprintf(w, "  desired     %d (%s)\n", st.Desired, st.Why)
	fmt.Fprintf(w, "  runners     %d: %s; outdated %d\n", len(st.Runners), stateSummary(st.RunnersByState), st.Outdated)
	if s := clusterSummary(st.Clusters); s != "" {
		fmt.Fprintf(w, "  clusters    %s (new runners go to the first that answers)\n", s)
	}
	fmt.Fprintf(w, "  reserved    %d queued job(s)\n", st.Reservations)
	if st.Spec.PrewarmOn() || st.Predicted > 0 {
		lead := ""
		if st.PrewarmLead > 0 {
			lead = fmt.Sprintf(", started %s ahead", st.PrewarmLead.Round(time.Second))
		}
		fmt.Fprintf(w, "  predicted   %d runner(s) warmed for jobs not queued yet%s%s\n", st.Predicted, lead, predictedFor(st.PredictedWhy))
	}
	if st.WarmWanted > 0 || len(st.Warm) > 0 {
		fmt.Fprintf(w, "  warm        %d registration(s) minted ahead, %d ready, %d wanted\n", len(st.Warm), st.WarmReady, st.WarmWanted)
	}
	for _, b := range st.Blocked {
		fmt.Fprintf(w, "  blocked     %d runner(s) waiting for room (%s) since %s: %s\n",
			b.Runners, b.Reason, b.Since.UTC().Format(time.RFC3339), b.Message)
	}
	printPull(w, st.Pull)
	printScaleSet(w, st.ScaleSet)
	fmt.Fprintf(w, "  template    %s  generation %s  started %d, finished %d, failed %d\n",
		st.TemplateHash, st.Generation, st.Totals.Started, st.Totals.Finished, st.Totals.Failed)
	if len(st.Runners) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nRUNNER\tSTATE\tTEMPLATE\tSINCE\tNOTE")
		for _, r := range st.Runners {
			note := ""
			if r.Draining {
				note = "draining: " + r.DrainReason
			}
			if r.Blocked != nil {
				note = strings.TrimSpace("waiting for room (" + r.Blocked.Reason + ") " + note)
			}
			if r.Stateful {
				note = strings.TrimSpace(fmt.Sprintf("slot %d %s", r.Slot, note))
			}
			if r.Cluster != "" {
				note = strings.TrimSpace("on " + r.Cluster + " " + note)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.State, r.TemplateHash, r.Since.UTC().Format(time.RFC3339), note)
		}
		tw.Flush()
	}
	if len(st.Decisions) > 0 {
		fmt.Fprintln(w, "\nRecent decisions:")
		for _, d := range st.Decisions {
			fmt.Fprintf(w, "  %s desired %d started %v drained %v — %s\n", d.At.UTC().Format(time.RFC3339), d.Desired, d.Started, d.Drained, d.Why)
		}
	}
	for _, o := range st.Orphans {
		fmt.Fprintf(w, "Orphan: %s (GitHub id %d, online %v, busy %v) since %s\n", o.Name, o.ID, o.Online, o.Busy, o.FirstSeen.UTC().Format(time.RFC3339))
	}
}

func boundsSource(st workflows.PoolStatus) string {
	var from []string
	if st.OverrideActive {
		from = append(from, "scheduled override active")
	}
	if st.Scale.Min != nil || st.Scale.Max != nil {
		from = append(from, "operator scale in force")
	}
	if len(from) == 0 {
		return ""
	}
	return " (" + strings.Join(from, ", ") + ")"
}

// printTable writes one line per pool.
func printTable(ctx context.Context, c client.Client, pools []string, output string, w io.Writer) error {
	var all []workflows.PoolStatus
	for _, p := range pools {
		st, err := Status(ctx, c, p)
		if err != nil {
			return err
		}
		all = append(all, st)
	}
	if output == "json" {
		return writeJSON(w, all)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tSCOPE\tLABELS\tMODE\tMIN\tMAX\tDESIRED\tRUNNERS\tIDLE\tBUSY\tRESERVED\tPREDICTED\tBLOCKED")
	for _, st := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", st.Name, st.Spec.Scope(), strings.Join(st.Spec.Labels, ","),
			st.Mode, st.Bounds.Min, st.Bounds.Max, st.Desired, len(st.Runners),
			st.RunnersByState[workflows.RunnerIdle], st.RunnersByState[workflows.RunnerBusy], st.Reservations,
			predictedColumn(st), blockedSummary(st.Blocked))
	}
	return tw.Flush()
}

// blockedSummary is the runners waiting for room, by reason ("15 quota"), or "-".
func blockedSummary(blocks []workflows.PoolBlock) string {
	var parts []string
	for _, b := range blocks {
		parts = append(parts, fmt.Sprintf("%d %s", b.Runners, b.Reason))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// predictedColumn is the runners warmed for predicted jobs, or "-" for a pool that does not
// prewarm.
func predictedColumn(st workflows.PoolStatus) string {
	if !st.Spec.PrewarmOn() && st.Predicted == 0 {
		return "-"
	}
	return strconv.Itoa(st.Predicted)
}

// predictedFor names the jobs the predicted runners are warmed for, when there are some.
func predictedFor(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}
