package workflows

import (
	"fmt"
	"testing"
	"time"
)

// A runner whose pod waits for room shows in the pool's status from the create-pod activity's
// first report until its pod exists (the activity's clearing report) or the runner reports idle
// (a clearing report lost); a repeated report keeps the wait's start. Across continue-as-new.
func TestPoolShowsRunnersWaitingForRoom(t *testing.T) {
	for _, canAfter := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("continue-as-new after %d", canAfter), func(t *testing.T) {
			h := newPoolHarness(t, canAfter)
			spec := poolTestSpec()
			spec.MinReplicas = 2
			first, second := RunnerName("linux", Generation(""), 1), RunnerName("linux", Generation(""), 2)
			h.silence(first)
			h.silence(second)
			refusal := func(used int) string {
				return fmt.Sprintf(`create pod default/x: pods "x" is forbidden: exceeded quota: runners, requested: pods=1, used: pods=%d, limited: pods=5`, used)
			}
			blocked := func(name string, used int) func() {
				return func() {
					h.signal(SignalRunnerBlocked, RunnerBlockReport{Runner: name, Blocked: true, Reason: BlockQuota, Message: refusal(used)})
				}
			}
			h.at(5*time.Second, blocked(first, 5))
			h.at(6*time.Second, blocked(second, 5))
			var since time.Time
			h.check(10*time.Second, "both runners waiting for room", func(st PoolStatus) bool {
				if len(st.Blocked) != 1 {
					return false
				}
				since = st.Blocked[0].Since
				b := st.Blocked[0]
				return b.Reason == BlockQuota && b.Runners == 2 && b.Message == refusal(5) &&
					st.Runners[0].Blocked != nil && st.Runners[1].Blocked != nil
			})
			h.at(20*time.Second, blocked(first, 6))
			h.check(25*time.Second, "a repeated report keeps the wait's start", func(st PoolStatus) bool {
				return len(st.Blocked) == 1 && st.Blocked[0].Runners == 2 && st.Blocked[0].Since.Equal(since) &&
					st.Runners[0].Blocked.Message == refusal(6)
			})
			h.at(30*time.Second, func() { h.signal(SignalRunnerBlocked, RunnerBlockReport{Runner: first}) })
			h.check(35*time.Second, "the admitted runner no longer waits", func(st PoolStatus) bool {
				return len(st.Blocked) == 1 && st.Blocked[0].Runners == 1 && st.Runners[0].Blocked == nil
			})
			h.at(40*time.Second, func() { h.report(second, RunnerIdle, "") })
			end := h.run(spec, time.Minute)
			if len(end.Blocked) != 0 || end.Runners[1].Blocked != nil {
				t.Errorf("blocked %+v after the runner reported idle, want none", end.Blocked)
			}
			if end.Totals.Failed != 0 || end.Totals.Started != 2 {
				t.Errorf("totals %+v, want 2 started and none failed", end.Totals)
			}
		})
	}
}
