package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printPeer prints runnerflow's figures 1, 2 and 4 beside the peer's, burst by burst, with the
// ratio runnerflow / peer: below 1, runnerflow is faster or spends less.
func printPeer(w io.Writer, r Results) {
	p := r.Peer
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nrunnerflow vs %s %s, each in a fresh world of its own, one after the other; the peer's settings: "+
		"resync every %.0f s, webhook batch %.0f s (its own), scale-down delay %.0f s after a scale-out, ephemeral runners; ratio = runnerflow / %s\n",
		p.Name, p.Version, p.SyncPeriodSeconds, p.BatchSeconds, p.ScaleDownDelaySeconds, peerShort(p))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "FIGURE\tMEASURE\tRUNNERFLOW\t%s\tRATIO\n", strings.ToUpper(peerShort(p)))
	var sizes []comparison
	for _, n := range r.Options.Jobs {
		rf, okRF := burstOf(r.Bursts, n)
		pb, okPeer := peerBurstOf(p.Bursts, n)
		if okRF || okPeer {
			sizes = append(sizes, comparison{w: tw, n: n, rf: rf, pb: pb, haveRF: okRF, havePeer: okPeer, peer: peerShort(p)})
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

// comparison prints the rows of one burst size; haveRF and havePeer say which side has
// figures.
type comparison struct {
	w                io.Writer
	n                int
	rf               BurstResult
	pb               PeerBurstResult
	haveRF, havePeer bool
	peer             string
}

func (c comparison) latency() {
	fig := fmt.Sprintf("1 scale-up latency, N=%d", c.n)
	steps := []struct {
		name     string
		rf, peer Percentiles
	}{
		{"webhook → pod create", c.rf.Latency.ToPodCreate, c.pb.Latency.ToPodCreate},
		{"webhook → runner online", c.rf.Latency.ToOnline, c.pb.Latency.ToOnline},
		{"webhook → job started", c.rf.Latency.ToStarted, c.pb.Latency.ToStarted},
	}
	for _, s := range steps {
		for _, q := range []struct {
			name     string
			rf, peer float64
		}{{"p50", s.rf.P50ms, s.peer.P50ms}, {"p95", s.rf.P95ms, s.peer.P95ms}, {"max", s.rf.MaxMs, s.peer.MaxMs}} {
			c.row(fig, s.name+" "+q.name, q.rf, q.peer, "%.0f ms")
			fig = ""
		}
	}
	c.row("", fmt.Sprintf("all %d jobs started after", c.n), c.rf.Latency.AllStartedSeconds, c.pb.Latency.AllStartedSeconds, "%.1f s")
	c.row("", "runner lifecycles per job", ratio(c.rf.Runners, c.rf.Jobs), ratio(c.pb.Runners, c.pb.Jobs), "%.2f")
}

func (c comparison) costs() {
	c.row(fmt.Sprintf("2 GitHub REST calls, N=%d", c.n), "per job", c.rf.GitHub.PerJob, c.pb.GitHub.PerJob, "%.2f")
	c.row("", "per runner lifecycle", c.rf.GitHub.PerRunner, c.pb.GitHub.PerRunner, "%.2f")
	c.row(fmt.Sprintf("4 Kubernetes writes, N=%d", c.n), "per job", c.rf.Kubernetes.PerJob, c.pb.Kubernetes.PerJob, "%.2f")
	c.row("", "per runner lifecycle", c.rf.Kubernetes.PerRunner, c.pb.Kubernetes.PerRunner, "%.2f")
}

// breakdowns prints, per burst size, what the calls and writes were, and how the peer took
// the burst's webhooks and whether its pods ran the jobs.
func (c comparison) breakdowns() {
	fmt.Fprintf(c.w, "N=%d\n", c.n)
	if c.haveRF {
		fmt.Fprintf(c.w, "  runnerflow GitHub calls: %s\n", byCount(c.rf.GitHub.ByEndpoint))
	}
	if c.havePeer {
		fmt.Fprintf(c.w, "  %s GitHub calls: %s\n", c.peer, byCount(c.pb.GitHub.ByEndpoint))
	}
	if c.haveRF {
		fmt.Fprintf(c.w, "  runnerflow Kubernetes writes: %s\n", byCount(c.rf.Kubernetes.ByKind))
	}
	if c.havePeer {
		fmt.Fprintf(c.w, "  %s Kubernetes writes: %s\n", c.peer, byCount(c.pb.Kubernetes.ByKind))
		fmt.Fprintf(c.w, "  %s: %d of %d webhook deliveries refused; %d of %d jobs ran on pods it created; %d runner lifecycles\n",
			c.peer, c.pb.WebhooksRefused, c.pb.WebhooksSent, c.pb.JobsOnPeerPods, c.pb.Jobs, c.pb.Runners)
	}
}

// row prints one measure of both systems and their ratio; a side without figures shows "–".
func (c comparison) row(figure, measure string, rf, peer float64, format string) {
	cell := func(have bool, v float64) string {
		if !have {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	r := "–"
	if c.haveRF && c.havePeer && peer != 0 {
		r = fmt.Sprintf("%.2f", rf/peer)
	}
	fmt.Fprintf(c.w, "%s\t%s\t%s\t%s\t%s\n", figure, measure, cell(c.haveRF, rf), cell(c.havePeer, peer), r)
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

// peerShort is the peer's name in the table.
func peerShort(p *PeerResult) string {
	if p.Name == "actions-runner-controller" {
		return "ARC"
	}
	return p.Name
}
