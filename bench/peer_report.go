package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// printPeer prints runnerflow's figures 1, 2 and 4 beside each peer's (ARC's scale sets, then
// its summerwind mode), burst by burst, with the ratio runnerflow / peer after each peer's
// column: below 1, runnerflow is faster or spends less. All were measured in the same run.
func printPeer(w io.Writer, r Results) {
	peers := slices.DeleteFunc([]*PeerResult{r.PeerScaleSet, r.PeerScaleSetTuned, r.Peer}, func(p *PeerResult) bool { return p == nil })
	if len(peers) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, p := range peers {
		describePeer(w, p)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "FIGURE\tMEASURE\tRUNNERFLOW")
	for _, p := range peers {
		fmt.Fprintf(tw, "\t%s\tRATIO", strings.ToUpper(peerShort(p)))
	}
	fmt.Fprintln(tw)
	var sizes []comparison
	for _, n := range r.Options.Jobs {
		rf, okRF := burstOf(r.Bursts, n)
		c := comparison{w: tw, n: n, rf: rf, haveRF: okRF}
		some := okRF
		for _, p := range peers {
			pb, ok := peerBurstOf(p.Bursts, n)
			c.peers = append(c.peers, peerColumn{name: peerShort(p), pb: pb, have: ok})
			some = some || ok
		}
		if some {
			sizes = append(sizes, c)
		}
	}
	for _, c := range sizes {
		c.latency()
		c.costs()
	}
	_ = tw.Flush()
	// The breakdowns after the table: long lines would break its columns.
	for _, c := range sizes {
		c.w = w
		c.breakdowns()
	}
}

// describePeer says how a peer ran and where its figure 1 starts.
func describePeer(w io.Writer, p *PeerResult) {
	if p.Mode == modeScaleSets {
		fmt.Fprintf(w, "runnerflow vs %s %s (scale sets), in a fresh world of its own: a set per pool, 0 to N runners, ephemeral runners, "+
			"ARC's listener long-polling the double's Actions service; its settings: %s; it takes no webhooks, so its figure 1 starts when the job was queued at the double; ratio = runnerflow / %s\n",
			p.Name, p.Version, cmp.Or(p.Settings, "ARC's defaults"), peerShort(p))
		return
	}
	fmt.Fprintf(w, "runnerflow vs %s %s (summerwind), in a fresh world of its own; its settings: "+
		"resync every %.0f s, webhook batch %.0f s (its own), scale-down delay %.0f s after a scale-out, ephemeral runners; ratio = runnerflow / %s\n",
		p.Name, p.Version, p.SyncPeriodSeconds, p.BatchSeconds, p.ScaleDownDelaySeconds, peerShort(p))
}

// comparison prints the rows of one burst size; haveRF and each peer's have say which side has
// figures.
type comparison struct {
	w      io.Writer
	n      int
	rf     BurstResult
	haveRF bool
	peers  []peerColumn
}

// peerColumn is one peer's burst of the size.
type peerColumn struct {
	name string
	pb   PeerBurstResult
	have bool
}

func (c comparison) latency() {
	fig := fmt.Sprintf("1 scale-up latency, N=%d", c.n)
	steps := []struct {
		name string
		rf   Percentiles
		peer func(PeerLatency) Percentiles
	}{
		{"webhook → pod create", c.rf.Latency.ToPodCreate, func(l PeerLatency) Percentiles { return l.ToPodCreate }},
		{"webhook → runner online", c.rf.Latency.ToOnline, func(l PeerLatency) Percentiles { return l.ToOnline }},
		{"webhook → job started", c.rf.Latency.ToStarted, func(l PeerLatency) Percentiles { return l.ToStarted }},
	}
	for _, s := range steps {
		for _, q := range []struct {
			name string
			of   func(Percentiles) float64
		}{
			{"p50", func(p Percentiles) float64 { return p.P50ms }},
			{"p95", func(p Percentiles) float64 { return p.P95ms }},
			{"max", func(p Percentiles) float64 { return p.MaxMs }},
		} {
			c.row(fig, s.name+" "+q.name, q.of(s.rf), func(b PeerBurstResult) float64 { return q.of(s.peer(b.Latency)) }, "%.0f ms")
			fig = ""
		}
	}
	c.row("", fmt.Sprintf("all %d jobs started after", c.n), c.rf.Latency.AllStartedSeconds,
		func(b PeerBurstResult) float64 { return b.Latency.AllStartedSeconds }, "%.1f s")
	c.row("", "runner lifecycles per job", ratio(c.rf.Runners, c.rf.Jobs),
		func(b PeerBurstResult) float64 { return ratio(b.Runners, b.Jobs) }, "%.2f")
}

func (c comparison) costs() {
	c.row(fmt.Sprintf("2 GitHub REST calls, N=%d", c.n), "per job", c.rf.GitHub.PerJob,
		func(b PeerBurstResult) float64 { return b.GitHub.PerJob }, "%.2f")
	c.row("", "per runner lifecycle", c.rf.GitHub.PerRunner,
		func(b PeerBurstResult) float64 { return b.GitHub.PerRunner }, "%.2f")
	if slices.ContainsFunc(c.peers, func(p peerColumn) bool { return p.pb.ActionsService != nil }) {
		// runnerflow uses no Actions service: its cell is 0.
		c.row("", "Actions service calls per job (not REST)", 0, func(b PeerBurstResult) float64 {
			if b.ActionsService == nil {
				return 0
			}
			return b.ActionsService.PerJob
		}, "%.2f")
	}
	c.row(fmt.Sprintf("4 Kubernetes writes, N=%d", c.n), "per job", c.rf.Kubernetes.PerJob,
		func(b PeerBurstResult) float64 { return b.Kubernetes.PerJob }, "%.2f")
	c.row("", "per runner lifecycle", c.rf.Kubernetes.PerRunner,
		func(b PeerBurstResult) float64 { return b.Kubernetes.PerRunner }, "%.2f")
}

// breakdowns prints, per burst size, what the calls and writes were, and how each peer took
// the burst's webhooks and whether its pods ran the jobs.
func (c comparison) breakdowns() {
	fmt.Fprintf(c.w, "N=%d\n", c.n)
	if c.haveRF {
		fmt.Fprintf(c.w, "  runnerflow GitHub calls: %s\n", byCount(c.rf.GitHub.ByEndpoint))
		fmt.Fprintf(c.w, "  runnerflow Kubernetes writes: %s\n", byCount(c.rf.Kubernetes.ByKind))
	}
	for _, p := range c.peers {
		if !p.have {
			continue
		}
		b := p.pb
		fmt.Fprintf(c.w, "  %s GitHub calls: %s\n", p.name, byCount(b.GitHub.ByEndpoint))
		if b.ActionsService != nil {
			fmt.Fprintf(c.w, "  %s Actions service calls: %s\n", p.name, byCount(b.ActionsService.ByEndpoint))
		}
		fmt.Fprintf(c.w, "  %s Kubernetes writes: %s\n", p.name, byCount(b.Kubernetes.ByKind))
		webhooks := "no webhooks (its listeners poll)"
		if b.WebhooksSent > 0 {
			webhooks = fmt.Sprintf("%d of %d webhook deliveries refused", b.WebhooksRefused, b.WebhooksSent)
		}
		warm := ""
		if b.Warm > 0 {
			warm = fmt.Sprintf("; %d warm runners ready when the jobs were queued, %d jobs ran on them", b.Warm, b.JobsOnWarmRunners)
		}
		fmt.Fprintf(c.w, "  %s: %s; %d of %d jobs ran on pods it created; %d runner lifecycles%s\n",
			p.name, webhooks, b.JobsOnPeerPods, b.Jobs, b.Runners, warm)
	}
}

// row prints one measure of runnerflow and of each peer, each peer's followed by the ratio
// runnerflow / peer; a side without figures shows "–".
func (c comparison) row(figure, measure string, rf float64, peer func(PeerBurstResult) float64, format string) {
	cell := func(have bool, v float64) string {
		if !have {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	fmt.Fprintf(c.w, "%s\t%s\t%s", figure, measure, cell(c.haveRF, rf))
	for _, p := range c.peers {
		v := peer(p.pb)
		r := "–"
		if c.haveRF && p.have && v != 0 {
			r = fmt.Sprintf("%.2f", rf/v)
		}
		fmt.Fprintf(c.w, "\t%s\t%s", cell(p.have, v), r)
	}
	fmt.Fprintln(c.w)
}

func burstOf(bursts []BurstResult, n int) (BurstResult, bool) {
	for _, b := range bursts {
		if b.Jobs == n {
			return b, true
		}
	}
	return BurstResult{}, false
}

func peerBurstOf(bursts []PeerBurstResult, n int) (PeerBurstResult, bool) {
	for _, b := range bursts {
		if b.Jobs == n {
			return b, true
		}
	}
	return PeerBurstResult{}, false
}

// peerShort is the peer's name in the table, with its mode.
func peerShort(p *PeerResult) string {
	name := p.Name
	if name == "actions-runner-controller" {
		name = "ARC"
	}
	if p.Mode != "" {
		name += " " + p.Mode
	}
	if p.Tuned {
		name += " tuned"
	}
	return name
}
