package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// How the Actions service hands a scale set its jobs, which marks a scale-set burst
// (BurstResult.Mode).
const (
	// modeScaleSet: the service assigns the set its jobs (github.com).
	modeScaleSet = "scaleset"
	// modeScaleSetOffers: the service offers the set its jobs and assigns each one once the
	// set's listener has acquired it (GitHub Enterprise Server).
	modeScaleSetOffers = "scaleset-offers"
)

// runScaleSetBursts runs, with --scaleset, every burst size again with scale-set pools, once
// with sets that are assigned their jobs and once with sets that are offered them: the same
// jobs, the same runners, but each pool told of its jobs by its set's listener (the Actions
// service's message session) instead of webhooks. failed records a failed burst and says
// whether the run was interrupted.
func (e *env) runScaleSetBursts(ctx context.Context, res *Results, failed func(string, error) bool) error {
	if !e.opts.ScaleSet || !e.opts.runs("burst") {
		return nil
	}
	for _, n := range e.opts.Jobs {
		for _, mode := range []string{modeScaleSet, modeScaleSetOffers} {
			b, err := e.scaleSetBurst(ctx, n, mode)
			if err != nil && failed(fmt.Sprintf("scale-set burst of %d jobs, %s", n, flowName(mode)), err) {
				return ctx.Err()
			}
			if err == nil {
				res.ScaleSetBursts = append(res.ScaleSetBursts, b)
			}
		}
	}
	return nil
}

// scaleSetBurst measures figures 1–4 for n jobs queued at once across two fresh scale-set
// pools whose sets get their jobs as mode says. The double sends no webhook meanwhile (a scale
// set needs none, and the intake must not see these jobs), and the sets' listeners are ended
// afterwards: they outlive their pools by design.
func (e *env) scaleSetBurst(ctx context.Context, n int, mode string) (BurstResult, error) {
	b := &burstPhase{e: e, n: n, scaleSet: true, offers: mode == modeScaleSetOffers}
	e.say("scale-set pools, %s:", flowName(mode))
	e.world.GitHub.SetWebhookURL("")
	defer e.world.GitHub.SetWebhookURL(e.intake.url)
	defer b.endListeners()
	return e.runBurst(ctx, b)
}

// mode is the burst's BurstResult.Mode: empty for webhooks.
func (b *burstPhase) mode() string {
	switch {
	case b.offers:
		return modeScaleSetOffers
	case b.scaleSet:
		return modeScaleSet
	}
	return ""
}

// flowName names a scale-set burst's mode in the table and the progress lines.
func flowName(mode string) string {
	if mode == modeScaleSetOffers {
		return "jobs offered (GHES)"
	}
	return "jobs assigned (github.com)"
}

// prefix tells a burst's pools from the other modes' bursts of the same size.
func (b *burstPhase) prefix() string {
	switch {
	case b.offers:
		return "so"
	case b.scaleSet:
		return "ss"
	}
	return ""
}

// waitListening waits until every pool's set exists, its listener runs and the double has
// its message session open, so the burst's messages have a reader; it notes the sets.
func (b *burstPhase) waitListening(ctx context.Context) (err error) {
	b.setIDs, err = waitListening(ctx, b.e, b.pools...)
	return err
}

// waitListening waits until each pool's set exists, its listener runs and the double has its
// message session open, and returns the sets' ids in the pools' order.
func waitListening(ctx context.Context, e *env, pools ...string) ([]int64, error) {
	var ids []int64
	for _, p := range pools {
		var id int64
		err := pollEvery(ctx, time.Second, "the scale set of pool "+p+" listened to", func() (bool, error) {
			st, err := e.status(ctx, p)
			if err != nil || st.ScaleSet == nil || st.ScaleSet.ScaleSetID == 0 || !st.ScaleSet.Listening {
				return false, err
			}
			id = st.ScaleSet.ScaleSetID
			return sessionOpen(e.world.GitHub, id), nil
		})
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sessionOpen says whether the double's set id has a message session open.
func sessionOpen(gh *githubdouble.Server, id int64) bool {
	for _, s := range gh.ScaleSets() {
		if s.ID == id && s.SessionID != "" {
			return true
		}
	}
	return false
}

// listenerQuery matches every run of the burst's listener workflows.
func (b *burstPhase) listenerQuery() string {
	var parts []string
	for i, id := range b.setIDs {
		parts = append(parts, fmt.Sprintf("WorkflowId = %q", workflows.ScaleSetListenerWorkflowID(b.pools[i], id)))
	}
	if len(parts) == 0 {
		return `WorkflowId = "none"`
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// endListeners terminates the burst's listeners, which would otherwise keep their sessions
// polling into the next phase.
func (b *burstPhase) endListeners() { endListeners(b.e, b.pools, b.setIDs) }

// endListeners terminates the listeners of pools' sets (ids in the pools' order).
func endListeners(e *env, pools []string, ids []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, id := range ids {
		if err := e.c.TerminateWorkflow(ctx, workflows.ScaleSetListenerWorkflowID(pools[i], id), "", "benchmark phase over"); err != nil {
			e.log.Warn("terminate scale-set listener", "pool", pools[i], "error", err)
		}
	}
}

// printScaleSetBursts prints each scale-set burst beside the webhook burst of the same size.
func printScaleSetBursts(w io.Writer, r Results) {
	for _, s := range r.ScaleSetBursts {
		var h *BurstResult
		for i := range r.Bursts {
			if r.Bursts[i].Jobs == s.Jobs {
				h = &r.Bursts[i]
			}
		}
		both := func(f func(BurstResult) string) string {
			if h == nil {
				return "webhook: not run | scale set: " + f(s)
			}
			return "webhook: " + f(*h) + " | scale set: " + f(s)
		}
		l := s.Latency
		row(w, fmt.Sprintf("S scale set vs webhook, N=%d, %s", s.Jobs, flowName(s.Mode)), "1 queued at GitHub → job started", both(func(b BurstResult) string { return pct(b.Latency.QueuedToStarted) }))
		row(w, "", "1 all jobs started after", both(func(b BurstResult) string { return fmt.Sprintf("%.1f s", b.Latency.AllStartedSeconds) }))
		row(w, "", "1 scale set: queued → pool decided; → runner workflow", pct(l.ToPoolDecision)+"; "+pct(l.ToRunnerWorkflow))
		row(w, "", "1 scale set: queued → pod create; → runner online", pct(l.ToPodCreate)+"; "+pct(l.ToOnline))
		row(w, "", "runner lifecycles per job", both(func(b BurstResult) string {
			return fmt.Sprintf("%.2f (%d / %d; %d stranded)", ratio(b.Runners, b.Jobs), b.Runners, b.Jobs, len(b.Stranded))
		}))
		row(w, "", "2 REST calls per runner lifecycle", both(func(b BurstResult) string {
			return fmt.Sprintf("%.2f (%d calls)", b.GitHub.PerRunner, b.GitHub.Calls)
		}))
		row(w, "", "2 scale set: REST calls by endpoint", byCount(s.GitHub.ByEndpoint))
		if a := s.ActionsService; a != nil {
			row(w, "", "2 scale set: Actions service calls per runner lifecycle", fmt.Sprintf("%.2f (%d calls; not charged to the REST budget)", a.PerRunner, a.Calls))
			row(w, "", "2 scale set: Actions service calls per job; acquisitions apart", fmt.Sprintf("%.2f; %.2f besides acquisitions, %.2f acquisitions (%d)",
				a.PerJob, ratio(a.Calls-a.Acquisitions, s.Jobs), ratio(a.Acquisitions, s.Jobs), a.Acquisitions))
			row(w, "", "", byCount(a.ByEndpoint))
		}
		row(w, "", "3 Temporal actions per runner lifecycle", both(func(b BurstResult) string {
			return fmt.Sprintf("%.1f (runner workflow alone %.1f)", b.Temporal.ActionsPerRunner, b.Temporal.RunnerOnlyActionsPerRunner)
		}))
		row(w, "", "3 scale set: listener actions", fmt.Sprintf("%d (%s)", s.Temporal.Listeners.Actions.Total(), actionKinds(s.Temporal.Listeners.Actions)))
		row(w, "", "4 Kubernetes writes per runner lifecycle", both(func(b BurstResult) string { return fmt.Sprintf("%.2f", b.Kubernetes.PerRunner) }))
	}
}
