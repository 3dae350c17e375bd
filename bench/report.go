package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/runnerflow/runnerflow/workflows"
)

// printTable prints the results as one table, figure by figure: a figure's rows for every
// burst size come together, so sizes compare at a glance.
func printTable(w io.Writer, r Results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	printHeader(tw, r)
	for _, b := range r.Bursts {
		printLatency(tw, b)
	}
	for _, b := range r.Bursts {
		g := b.GitHub
		row(tw, fmt.Sprintf("2 GitHub REST calls, N=%d", b.Jobs), "per runner lifecycle; per job",
			fmt.Sprintf("%.2f (%d calls / %d runners); %.2f per job", g.PerRunner, g.Calls, b.Runners, g.PerJob))
		row(tw, "", "by endpoint", byCount(g.ByEndpoint))
	}
	if t := r.Throughput; t != nil {
		row(tw, "2 GitHub REST calls", "per webhook event", fmt.Sprintf("%.2f (%d calls / %d events)", t.GitHubCallsPerEvent, t.GitHubCalls, t.Acked))
	}
	for _, b := range r.Bursts {
		t := b.Temporal
		row(tw, fmt.Sprintf("3 Temporal, N=%d", b.Jobs), "per runner lifecycle (runner + pool + window + listing)",
			fmt.Sprintf("%.1f actions, %.1f history events (runner workflow alone: %.1f actions); %.1f actions per job",
				t.ActionsPerRunner, t.EventsPerRunner, t.RunnerOnlyActionsPerRunner, t.ActionsPerJob))
		row(tw, "", "actions by kind (all runs)", actionKinds(t.total().Actions))
	}
	if t := r.Throughput; t != nil {
		row(tw, "3 Temporal", "per webhook event (window + pool)",
			fmt.Sprintf("%.2f actions, %.2f history events (%s)", t.ActionsPerEvent, t.EventsPerEvent, actionKinds(t.Temporal.Actions)))
	}
	for _, b := range r.Bursts {
		k := b.Kubernetes
		row(tw, fmt.Sprintf("4 Kubernetes writes, N=%d", b.Jobs), "per runner lifecycle; per job",
			fmt.Sprintf("%.2f (%d writes / %d runners); %.2f per job; besides, %d renewals of the pod watcher's Lease", k.PerRunner, k.Writes, b.Runners, k.PerJob, k.LeaseWrites))
		row(tw, "", "by kind", byCount(k.ByKind))
	}
	printScaleSetBursts(tw, r)
	printMemory(tw, r.Memory)
	printFleet(tw, r.Fleet)
	printPullFleet(tw, r.PullFleet)
	printPipelines(tw, r.Pipelines)
	printSoak(tw, r.Soak)
	if t := r.Throughput; t != nil {
		row(tw, "6 starter throughput", fmt.Sprintf("offered %d/s, %d sent", t.OfferedPerSecond, t.Sent),
			fmt.Sprintf("%.1f acked/s, %d acked, %d failed; ack %s", t.AckedPerSecond, t.Acked, t.Failed, pct(t.AckTime)))
		row(tw, "", "events lost (acked − reserved)", fmt.Sprintf("%d (%d reservations)", t.Lost, t.Reserved))
	}
	for _, f := range r.Failures {
		row(tw, "FAILED", "", f)
	}
	_ = tw.Flush()
	printPeer(w, r)
}

// printHeader says where and under which settings the figures were measured.
func printHeader(w io.Writer, r Results) {
	m := r.Machine
	fmt.Fprintf(w, "runnerflow benchmark, %s, %d CPUs, %.0f GiB, %s, load average %s at start, %s at end\n",
		r.Date, m.CPUs, m.MemoryGiB, m.GoVersion, m.LoadStart, m.LoadEnd)
	kube := fmt.Sprintf("the worker binary's Kubernetes client limit (policy default: %d QPS, burst %d)",
		workflows.DefaultKubernetesQPS, workflows.DefaultKubernetesBurst)
	if o := r.Options; o.KubeQPS > 0 {
		kube = fmt.Sprintf("in-process worker's Kubernetes client limit raised to %.0f QPS, burst %d", o.KubeQPS, o.KubeBurst)
	}
	fmt.Fprintf(w, "bursts with %s; jobs run %.0f s; GitHub budget %d requests/hour; memory phase worker --kube-qps %g\n",
		kube, r.Options.JobSeconds, r.Options.GitHubBudgetPerHr, r.Options.MemoryKubeQPS)
	fmt.Fprintln(w, "FIGURE\tMEASURE\tVALUE")
}

func printLatency(w io.Writer, b BurstResult) {
	l := b.Latency
	row(w, fmt.Sprintf("1 scale-up latency, N=%d", b.Jobs), "webhook → pool decided to start its runner", pct(l.ToPoolDecision))
	row(w, "", "webhook → runner workflow started", pct(l.ToRunnerWorkflow))
	row(w, "", "webhook → pod create call", pct(l.ToPodCreate))
	row(w, "", "webhook → runner online", pct(l.ToOnline))
	row(w, "", "webhook → job started", pct(l.ToStarted))
	row(w, "", fmt.Sprintf("all %d jobs started after", b.Jobs), fmt.Sprintf("%.1f s (first webhook sent → last job started)", l.AllStartedSeconds))
	if l.SecondaryLimitSeconds > 0 {
		row(w, "", "GitHub's secondary limit for that many registrations",
			fmt.Sprintf("%.1f s; all started at %.2f × that bound", l.SecondaryLimitSeconds, l.AllStartedSeconds/l.SecondaryLimitSeconds))
	}
	row(w, "", "warm registrations; registrations on the hot path",
		fmt.Sprintf("%d warm; %d registrations by runners between the first webhook and the last job start (%d warm refills by the pools meanwhile)", b.Warm, b.HotPathRegistrations, b.WarmRefills))
	row(w, "", "runner lifecycles; stranded runner workflows",
		fmt.Sprintf("%d for %d jobs; %d stranded%s", b.Runners, b.Jobs, len(b.Stranded), examples(b.Stranded)))
	printOperator(w, b.Operator)
}

// printOperator renders what an operator felt during the burst.
func printOperator(w io.Writer, o OperatorResult) {
	row(w, "", "pool status query under the burst", fmt.Sprintf("%s; %d failed", pct(o.StatusQuery), o.StatusQueryFailures))
	if o.Deliveries > 0 {
		row(w, "", "webhook deliveries answered 503", fmt.Sprintf("%d of %d", o.Answered503, o.Deliveries))
	}
	printDeciderTrace(w, "pools", o.PoolTasks)
	printDeciderTrace(w, "scale windows", o.WindowTasks)
	printDeciderTrace(w, "scale-set listeners", o.ListenerTasks)
	printPodPath(w, o.PodPath)
}

// printPodPath renders where the pod-first runners' time went from pod to start (PodPathTrace).
func printPodPath(w io.Writer, p PodPathTrace) {
	if p.Total.N == 0 {
		return
	}
	row(w, "", "runners: pod created → pod running heard", pct(p.Total))
	row(w, "", "  pod created → scheduled heard", pct(p.Scheduled))
	row(w, "", "  scheduled heard → runner task started", pct(p.Woken))
	row(w, "", "  credential activity queue wait", pct(p.CredentialQueued))
	row(w, "", "  credential activity run", pct(p.CredentialRun))
	row(w, "", "  credential written → running heard", pct(p.Running))
}

// printDeciderTrace renders where a kind of decider's time went (DeciderTrace).
func printDeciderTrace(w io.Writer, who string, t DeciderTrace) {
	if t.Run.N == 0 {
		return
	}
	row(w, "", who+": signal → seen by a workflow task", pct(t.Heard))
	row(w, "", who+": workflow task queue wait", pct(t.QueueWait))
	row(w, "", who+": workflow task run", pct(t.Run))
	trouble := fmt.Sprintf("%d failed", t.Failed)
	if len(t.TimedOut) > 0 {
		trouble = byCount(t.TimedOut) + "; " + trouble
	}
	row(w, "", who+": workflow tasks timed out or failed", trouble)
	if t.ContinuesAsNew > 0 {
		row(w, "", who+": continued as new; suggestion → continue-as-new",
			fmt.Sprintf("%d; %s", t.ContinuesAsNew, pct(t.ContinueAsNewWait)))
	}
}

func printMemory(w io.Writer, m *MemoryResult) {
	if m == nil {
		return
	}
	row(w, "5 worker memory", "baseline RSS (no runner workflow)", fmt.Sprintf("%d KiB", m.BaselineRSSKiB))
	for _, p := range m.Points {
		state := fmt.Sprintf("set up in %.0f s", p.SetupSeconds)
		if !p.Complete {
			state = fmt.Sprintf("INCOMPLETE: %d of %d idle, %d alive after %.0f s", p.Idle, p.Runners, p.Alive, p.SetupSeconds)
		}
		row(w, "", fmt.Sprintf("K=%d idle runner workflows", p.Runners),
			fmt.Sprintf("RSS %d KiB, %.1f KiB per workflow (%s)", p.RSSKiB, p.KiBPerRunner, state))
	}
}

func row(w io.Writer, figure, measure, value string) {
	fmt.Fprintf(w, "%s\t%s\t%s\n", figure, measure, value)
}

func pct(p Percentiles) string {
	return fmt.Sprintf("p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms (n=%d)", p.P50ms, p.P95ms, p.P99ms, p.MaxMs, p.N)
}

// byCount renders counts largest first, so the largest cost leads.
func byCount(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, "; ")
}

func actionKinds(a Actions) string {
	return byCount(map[string]int{
		"workflow starts": a.WorkflowStarts, "signals": a.Signals, "activities": a.Activities,
		"timers": a.Timers, "updates": a.Updates, "child starts": a.ChildStarts,
		"search-attribute upserts": a.SearchAttributeUpserts, "markers": a.Markers, "other": a.Other,
	})
}

// examples names the first few of a list, for a table cell.
func examples(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	const shown = 3
	more := ""
	if len(ids) > shown {
		more = fmt.Sprintf(", … %d more", len(ids)-shown)
	}
	return " (" + strings.Join(ids[:min(shown, len(ids))], ", ") + more + ")"
}
