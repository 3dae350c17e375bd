package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Quota waits. The API server refuses a pod the namespace's ResourceQuota has no room for with
// 403 Forbidden ("exceeded quota"); that refusal clears by itself (pods end, an operator raises
// the quota), so the pod's create is retried (QuotaRetryDelay) and the runner waits instead of
// failing. Its pool learns of the wait from the create-pod activity itself (SignalRunnerBlocked:
// a report when the wait begins, a few more while it lasts, one when the pod exists), because
// the runner workflow sees nothing while its activity retries. A runner whose pod is admitted at
// once costs nothing more.

// ErrQuotaExceeded: the API server refused an object because the namespace's ResourceQuota has
// no room for it ("exceeded quota"), or has not counted a new or changed quota yet ("status
// unknown for quota"). Retried after QuotaRetryDelay; never fails a runner by itself.
const ErrQuotaExceeded = "QuotaExceeded"

// SignalRunnerBlocked tells a pool that one of its runners' pods is refused for a reason that
// clears by itself (RunnerBlockReport.Blocked), or that the pod now exists (Blocked false).
// Sent by the create-pod activity, not by the runner workflow.
const SignalRunnerBlocked = "runner-blocked"

// BlockQuota is the block reason of a pod refused by a ResourceQuota.
const BlockQuota = "quota"

// BlockReasons are the bounded values of runnerflow_pool_blocked's reason label.
var BlockReasons = []string{BlockQuota}

// MetricPoolBlocked is the gauge of a pool's runners whose pods wait for room, by reason.
const MetricPoolBlocked = "runnerflow_pool_blocked"

// RunnerBlockReport is SignalRunnerBlocked's payload.
type RunnerBlockReport struct {
	Runner string `json:"runner"`
	// Blocked is true while the runner's pod is refused; false once it exists.
	Blocked bool `json:"blocked"`
	// Reason is one of BlockReasons.
	Reason string `json:"reason,omitempty"`
	// Message is the API server's refusal (it names the quota and its usage, never Secret data).
	Message string `json:"message,omitempty"`
}

// RunnerBlock is why a runner's pod waits, as its pool holds it.
type RunnerBlock struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"`
}

// PoolBlock sums up the runners of a pool that wait for the same reason, for PoolStatus.
type PoolBlock struct {
	Reason string `json:"reason"`
	// Runners is how many of the pool's runners wait.
	Runners int `json:"runners"`
	// Since is when the longest wait began.
	Since time.Time `json:"since"`
	// Message is the refusal last reported for the newest of those runners.
	Message string `json:"message,omitempty"`
}

// onRunnerBlocked records a block report. Reports are idempotent: a repeated one keeps the
// wait's start and takes the newer message.
func (p *poolRun) onRunnerBlocked(rep RunnerBlockReport) {
	i := p.find(rep.Runner)
	if i < 0 {
		return
	}
	r := &p.st.Runners[i]
	switch {
	case rep.Blocked && r.Blocked == nil:
		p.logger.Warn("Runner pod refused; waiting for room", "runner", r.Name, "reason", rep.Reason, "message", rep.Message)
		r.Blocked = &RunnerBlock{Reason: rep.Reason, Message: rep.Message, Since: workflow.Now(p.ctx)}
	case rep.Blocked:
		r.Blocked.Message = rep.Message
	case r.Blocked != nil:
		p.logger.Info("Runner pod admitted after waiting", "runner", r.Name, "reason", r.Blocked.Reason,
			"waited", workflow.Now(p.ctx).Sub(r.Blocked.Since))
		r.Blocked = nil
	}
	p.recordBlocked()
}

// blocks sums up the waiting runners by reason, in BlockReasons order (then any other reason in
// the order of the runners).
func (p *poolRun) blocks() []PoolBlock {
	var out []PoolBlock
	for _, r := range p.st.Runners {
		if r.Blocked == nil {
			continue
		}
		i := slices.IndexFunc(out, func(b PoolBlock) bool { return b.Reason == r.Blocked.Reason })
		if i < 0 {
			out = append(out, PoolBlock{Reason: r.Blocked.Reason, Since: r.Blocked.Since})
			i = len(out) - 1
		}
		b := &out[i]
		b.Runners++
		if r.Blocked.Since.Before(b.Since) {
			b.Since = r.Blocked.Since
		}
		if r.Blocked.Message != "" {
			b.Message = r.Blocked.Message
		}
	}
	slices.SortStableFunc(out, func(a, b PoolBlock) int { return blockRank(a.Reason) - blockRank(b.Reason) })
	return out
}

func blockRank(reason string) int {
	if i := slices.Index(BlockReasons, reason); i >= 0 {
		return i
	}
	return len(BlockReasons)
}

// recordBlocked publishes MetricPoolBlocked for every reason (0 when none) through the
// replay-safe workflow metrics handler. It runs whenever the blocked set may have changed (a
// block report, a runner's state report, a runner's end), so the gauge says what status says.
func (p *poolRun) recordBlocked() {
	m := workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"pool": p.st.Spec.Name})
	for _, reason := range BlockReasons {
		n := 0
		for _, r := range p.st.Runners {
			if r.Blocked != nil && r.Blocked.Reason == reason {
				n++
			}
		}
		m.WithTags(map[string]string{"reason": reason}).Gauge(MetricPoolBlocked).Update(float64(n))
	}
}
