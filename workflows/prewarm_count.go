package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/client"
)

// What a prewarming pool's predictions came to, per pool (issue 39). The bookkeeping counts as
// it goes — PlanPrewarm as a job's warming begins and ends, forget for a run dropped while
// runners are still warm for it — into PrewarmState.Counts; the pool emits the counts at the
// end of each loop through the replay-safe metrics handler and keeps only what is left under a
// second (recordPrewarmMetrics). Counting reads nothing a decision reads and changes nothing
// a decision reads, so it needs no gate of its own. docs/metrics.md lists the series; the
// Prometheus bridge adds _total to each counter's name.
const (
	// MetricPrewarmPredicted counts the runners the pool set out to warm for predicted jobs
	// (a matrix job's instances each), when the warming begins. Decide may start fewer: the
	// queued jobs come first, and the pool's maximum holds.
	MetricPrewarmPredicted = "runnerflow_pool_prewarm_predicted_runners"
	// MetricPrewarmTaken counts, of those, the runners of jobs GitHub queued while they were
	// warm: from then the job's reservation holds them. GitHub hands a job to whichever idle
	// runner fits, so it is the pool's runners that serve the job, not one runner set aside.
	MetricPrewarmTaken = "runnerflow_pool_prewarm_taken_runners"
	// MetricPrewarmWasted counts the runners of predictions that failed, by reason
	// (PrewarmWasteReasons).
	MetricPrewarmWasted = "runnerflow_pool_prewarm_wasted_runners"
	// MetricPrewarmWastedSeconds counts those runners' time from the warming's start to the
	// pool giving them up, in runner-seconds, by reason: the workflow does not know which
	// runner a prediction's is, so this bounds their idle time from above (a runner's start
	// is counted, its drain after is not).
	MetricPrewarmWastedSeconds = "runnerflow_pool_prewarm_wasted_runner_seconds"
)

// WarmForgotten is the waste reason of runners still warm for a run the pool stopped
// following (PrewarmRunIdleForget without an event, or pushed out by PrewarmRunsKept newer
// runs): the scale-down lets them go.
const WarmForgotten = "forgotten"

// PrewarmWasteReasons are the bounded values of the wasted metrics' reason label, in the order
// PrewarmCounts keeps them.
var PrewarmWasteReasons = []string{WarmSkipped, WarmMissed, WarmForgotten}

// PrewarmCounts are the prewarm metrics' counts not emitted yet.
type PrewarmCounts struct {
	Predicted int `json:"predicted,omitempty"`
	Taken     int `json:"taken,omitempty"`
	// Wasted has at most one entry per reason, in PrewarmWasteReasons' order.
	Wasted []PrewarmWaste `json:"wasted,omitempty"`
}

// PrewarmWaste is what one reason wasted.
type PrewarmWaste struct {
	Reason  string `json:"reason"`
	Runners int    `json:"runners,omitempty"`
	// Held is the runners' time from their warming's start to the pool giving them up,
	// summed over the runners.
	Held time.Duration `json:"held,omitempty"`
}

// began counts a job's warming as it begins.
func (c *PrewarmCounts) began(h PrewarmWarmed) { c.Predicted += h.Runners }

// ended counts a job's warming as it ends (h.Over set) at now.
func (c *PrewarmCounts) ended(h PrewarmWarmed, now time.Time) {
	switch h.Over {
	case WarmTaken:
		c.Taken += h.Runners
	case WarmSkipped, WarmMissed:
		c.waste(h.Over, h, now)
	}
}

// forgot counts the runners still warm for a run dropped at now.
func (c *PrewarmCounts) forgot(run PrewarmRun, now time.Time) {
	for _, h := range run.Warmed {
		if h.Over == "" {
			c.waste(WarmForgotten, h, now)
		}
	}
}

// waste adds h's runners, and their time since h began, to the reason's entry. An entry made
// before PrewarmWarmed.At was kept counts its runners only.
func (c *PrewarmCounts) waste(reason string, h PrewarmWarmed, now time.Time) {
	i := slices.IndexFunc(c.Wasted, func(w PrewarmWaste) bool { return w.Reason == reason })
	if i < 0 {
		c.Wasted = append(c.Wasted, PrewarmWaste{Reason: reason})
		slices.SortStableFunc(c.Wasted, func(a, b PrewarmWaste) int {
			return slices.Index(PrewarmWasteReasons, a.Reason) - slices.Index(PrewarmWasteReasons, b.Reason)
		})
		i = slices.IndexFunc(c.Wasted, func(w PrewarmWaste) bool { return w.Reason == reason })
	}
	c.Wasted[i].Runners += h.Runners
	if !h.At.IsZero() && now.After(h.At) {
		c.Wasted[i].Held += time.Duration(h.Runners) * now.Sub(h.At)
	}
}

// clone copies the counts so that counting on the copy leaves the original as it was.
func (c PrewarmCounts) clone() PrewarmCounts {
	c.Wasted = slices.Clone(c.Wasted)
	return c
}

// emit records the counts on m and returns what is left: the runner time under a whole
// second, which a later emission carries on.
func (c PrewarmCounts) emit(m client.MetricsHandler) PrewarmCounts {
	if c.Predicted > 0 {
		m.Counter(MetricPrewarmPredicted).Inc(int64(c.Predicted))
	}
	if c.Taken > 0 {
		m.Counter(MetricPrewarmTaken).Inc(int64(c.Taken))
	}
	var left PrewarmCounts
	for _, w := range c.Wasted {
		byReason := m.WithTags(map[string]string{"reason": w.Reason})
		if w.Runners > 0 {
			byReason.Counter(MetricPrewarmWasted).Inc(int64(w.Runners))
		}
		if secs := int64(w.Held / time.Second); secs > 0 {
			byReason.Counter(MetricPrewarmWastedSeconds).Inc(secs)
		}
		if rest := w.Held % time.Second; rest > 0 {
			left.Wasted = append(left.Wasted, PrewarmWaste{Reason: w.Reason, Held: rest})
		}
	}
	return left
}

// recordPrewarmMetrics emits the prewarm counts made since the last emission and keeps what
// is left of them. It changes the state, not a command: a replayed history changes it alike,
// while the replay-safe handler records nothing again.
func (p *poolRun) recordPrewarmMetrics(m client.MetricsHandler) {
	if p.st.Prewarm == nil {
		return
	}
	p.st.Prewarm.Counts = p.st.Prewarm.Counts.emit(m)
}
