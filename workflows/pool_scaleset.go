package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// changeScaleSetPools gates a scale-set pool's steps (the set, its listener, its messages).
// It is asked only by a pool whose spec has a scaleSet section, which no pool before this
// release could have (the section was refused): every other pool records no marker and issues
// exactly the commands it issued before.
const changeScaleSetPools = "scaleset-pools"

// askScaleSetPools is changeScaleSetPools's one GetVersion call, for its gate.
func askScaleSetPools(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeScaleSetPools, workflow.DefaultVersion, 1)
}

// changeScaleSetRanUnseen gates counting the runners that finished a job no message had named
// them at yet as jobs done (ScaleSetFinishedUnseen), waking when such a count's hold lapses,
// and counting a runner a completed message names as leaving (JobDone). Asked only by a
// scale-set pool when a message names one of its runners or one of them ends after a job, so
// other histories carry no marker.
const changeScaleSetRanUnseen = "scaleset-ran-unseen"

// askScaleSetRanUnseen is changeScaleSetRanUnseen's one GetVersion call, for its gate.
func askScaleSetRanUnseen(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeScaleSetRanUnseen, workflow.DefaultVersion, 1)
}

// changeScaleSetStatisticsFirst gates the set's statistics as the truth of its demand: a
// job a later message assigns again after an earlier one completed it is open again
// (ReopenReassigned), the ledger holds no more jobs than the statistics' assigned count for
// longer than ScaleSetLedgerExcessHold (BoundScaleSetLedger, with a wake when the hold
// lapses), and the statistics a session opens with are taken. Asked only by a scale-set
// pool, when a message or a session's statistics arrive, or its hold is tended.
const changeScaleSetStatisticsFirst = "scaleset-statistics-first"

// askScaleSetStatisticsFirst is changeScaleSetStatisticsFirst's one GetVersion call, for its gate.
func askScaleSetStatisticsFirst(ctx workflow.Context) workflow.Version {
	return workflow.GetVersion(ctx, changeScaleSetStatisticsFirst, workflow.DefaultVersion, 1)
}

// changeScaleSetAcquiredAssigned gates folding the jobs the listener acquired into the ledger
// as assigned when their message arrives (ApplyScaleSetAcquired): before it they counted only
// once their own assigned messages came. Asked only by a scale-set pool, when a message arrives
// with acquired jobs, which only a listener under changeScaleSetHandOverAcquired sends.
const changeScaleSetAcquiredAssigned = "scaleset-acquired-assigned"

// changeScaleSetSessionStatisticsOrder gates keeping the statistics of a session's message
// over the statistics that session opened with when the message was taken first
// (SessionStatisticsStale): the listener hands the opening statistics over before it polls
// the session, so they are older, but the pool takes each signal name on its own channel and,
// when both wait in one workflow task (its worker stopping in a deploy), the opening
// statistics come after. Asked only by a scale-set pool, when a session's opening statistics
// arrive after a message of that session.
const changeScaleSetSessionStatisticsOrder = "scaleset-session-statistics-order"

// scaleSetDemand is the demand of a scale-set pool: the set's jobs as its messages tell them
// (the ledger, ScaleSetLedger) and GitHub's statistics, handed over by the set's listener
// (ScaleSetListenerWorkflow), which this source keeps running. A run of a history from before
// the scale-set pools (changeScaleSetPools) has no set and wants nothing of its own.
type scaleSetDemand struct {
	*poolRun
	// pools, ranUnseen and statisticsFirst are the gates of changeScaleSetPools,
	// changeScaleSetRanUnseen and changeScaleSetStatisticsFirst.
	pools, ranUnseen, statisticsFirst gate
	// working is true while the set is brought to the spec, its listener started or told the
	// pool's maximum, or a set left behind deleted.
	working bool
}

func newScaleSetDemand(p *poolRun) *scaleSetDemand {
	return &scaleSetDemand{
		poolRun:         p,
		pools:           gate{ask: askScaleSetPools},
		ranUnseen:       gate{ask: askScaleSetRanUnseen},
		statisticsFirst: gate{ask: askScaleSetStatisticsFirst},
	}
}

// hear takes the listener's signals and the ends of the pool's runners.
func (p *scaleSetDemand) hear(news demandNews) {
	switch n := news.(type) {
	case ScaleSetMessageSignal:
		p.onScaleSetMessage(n)
	case ScaleSetListenerEnded:
		p.onScaleSetListenerEnded(n)
	case ScaleSetSessionOpened:
		p.onScaleSetSessionOpened(n)
	case runnerEnd:
		p.noteScaleSetRunnerEnd(n.last, n.report)
	}
}

// busy is true while work on the set runs beside the loop.
func (p *scaleSetDemand) busy() bool { return p.working }

// wake is the earliest of: a retry of the set after a failure, a finished runner's hold
// lapsing, the ledger's excess over the statistics outlasting its hold.
func (p *scaleSetDemand) wake(now time.Time) time.Time {
	return soonest(p.scaleSetWake(), p.scaleSetFinishedWake(now), p.scaleSetExcessWake(now))
}

// scaleSetOn reports whether this pool is a scale set's; the version is asked once per run.
func (p *scaleSetDemand) scaleSetOn() bool {
	return p.st.Spec.IsScaleSet() && p.pools.inForce(p.ctx)
}

// onScaleSetMessage folds a message of the pool's set into its ledger; a message handed
// again, or one of a set the pool moved on from, changes nothing.
func (p *scaleSetDemand) onScaleSetMessage(sig ScaleSetMessageSignal) {
	st := p.st.ScaleSet
	if st == nil || sig.ScaleSetID != st.ScaleSetID {
		return
	}
	ledger := st.Ledger
	if renumbered := sig.Message.ID < ledger.LastMessageID && st.CursorSession != "" && sig.SessionID != st.CursorSession; renumbered && p.scaleSetStatisticsFirstOn() {
		// A new session's message below the cursor: the service numbers each session's
		// messages afresh (a redelivery under one numbering is the last message handed over,
		// at the cursor, since the listener acknowledges each before its next poll, and it
		// starts each session's cursor afresh). The cursor follows the new numbering.
		ledger.LastMessageID = 0
	}
	if sig.Message.ID <= ledger.LastMessageID {
		// Handed again: counted already. Its statistics, the set's as of the answer, are the
		// newest; jobs acquired after it (offers kept for room) are the service's word of now.
		if p.scaleSetStatisticsFirstOn() {
			st.Statistics, st.AcquiredSince = sig.Message.Statistics, 0
			st.StatisticsSession = sig.SessionID
		}
		p.takeScaleSetAcquired(sig.Acquired)
		if p.scaleSetStatisticsFirstOn() {
			p.boundScaleSetLedger(workflow.Now(p.ctx))
		}
		return
	}
	if p.scaleSetStatisticsFirstOn() {
		ledger = ReopenReassigned(ledger, sig.Message)
		st.CursorSession, st.StatisticsSession = sig.SessionID, sig.SessionID
	}
	ledger, _ = ApplyScaleSetMessage(ledger, sig.Message)
	st.Ledger, st.Statistics, st.SessionID = ledger, sig.Message.Statistics, sig.SessionID
	st.AcquiredSince = 0
	st.MessageAt = workflow.Now(p.ctx)
	st.Finished = ForgetNamedRunners(st.Finished, sig.Message, st.MessageAt)
	p.markScaleSetJobsDone(sig.Message)
	p.takeScaleSetAcquired(sig.Acquired)
	p.boundScaleSetLedger(st.MessageAt)
}

// takeScaleSetAcquired folds the jobs the listener acquired after a message into the ledger as
// waiting (ApplyScaleSetAcquired), so a burst's runners follow its acquisitions rather than
// statistics that lag them by a message and assigned messages that lag them by the burst. The
// message's statistics were taken before the acquisition: the jobs count on top of them too,
// or the ledger would seem to hold more than the service assigned (BoundScaleSetLedger).
func (p *scaleSetDemand) takeScaleSetAcquired(acquired []int64) {
	if len(acquired) == 0 || !p.scaleSetOn() ||
		workflow.GetVersion(p.ctx, changeScaleSetAcquiredAssigned, workflow.DefaultVersion, 1) < 1 {
		return
	}
	st := p.st.ScaleSet
	st.Ledger = ApplyScaleSetAcquired(st.Ledger, acquired)
	st.AcquiredSince += len(acquired)
}

// assignedNow is the service's statistics with the jobs acquired since they were taken counted
// as assigned.
func (st *PoolScaleSetState) assignedNow() ScaleSetStatistics {
	s := st.Statistics
	s.AssignedJobs += st.AcquiredSince
	return s
}

// onScaleSetSessionOpened takes the statistics a new session opened with: a set adopted with
// jobs assigned (from another tool, or before the pool re-created its listener) shows them
// here, before any message names them. Statistics of a message of that session, taken
// already, are newer and stay (SessionStatisticsStale).
func (p *scaleSetDemand) onScaleSetSessionOpened(sig ScaleSetSessionOpened) {
	st := p.st.ScaleSet
	if st == nil || sig.ScaleSetID != st.ScaleSetID || !p.scaleSetStatisticsFirstOn() {
		return
	}
	if SessionStatisticsStale(st.StatisticsSession, sig.SessionID) &&
		workflow.GetVersion(p.ctx, changeScaleSetSessionStatisticsOrder, workflow.DefaultVersion, 1) >= 1 {
		st.SessionID = sig.SessionID
		return
	}
	st.Statistics, st.SessionID, st.AcquiredSince = sig.Statistics, sig.SessionID, 0
	p.boundScaleSetLedger(workflow.Now(p.ctx))
}

// boundScaleSetLedger trims the ledger to the statistics once its excess outlasts the hold
// (BoundScaleSetLedger).
func (p *scaleSetDemand) boundScaleSetLedger(now time.Time) {
	st := p.st.ScaleSet
	if st == nil || (st.ExcessSince.IsZero() && st.Ledger.Jobs() <= st.assignedNow().AssignedJobs) || !p.scaleSetStatisticsFirstOn() {
		return
	}
	st.Ledger, st.ExcessSince = BoundScaleSetLedger(st.Ledger, st.assignedNow(), st.ExcessSince, now)
}

// scaleSetExcessWake is when the ledger's excess over the statistics outlasts its hold (zero:
// none), so the pool lets the jobs no message will settle go then, not at some later message.
func (p *scaleSetDemand) scaleSetExcessWake(now time.Time) time.Time {
	st := p.st.ScaleSet
	if st == nil || st.ExcessSince.IsZero() { // only a pool under changeScaleSetStatisticsFirst has one
		return time.Time{}
	}
	if at := st.ExcessSince.Add(ScaleSetLedgerExcessHold); at.After(now) {
		return at
	}
	return time.Time{}
}

// scaleSetStatisticsFirstOn reports whether changeScaleSetStatisticsFirst is in force; the
// version is asked once per run, when first needed.
func (p *scaleSetDemand) scaleSetStatisticsFirstOn() bool {
	return p.scaleSetOn() && p.statisticsFirst.inForce(p.ctx)
}

// markScaleSetJobsDone counts the runners a message's completed events name as leaving
// (JobDone), as markJobsDone does for webhook pools: the runner exits after its one job, and
// its end, which comes after its cleanup, must not count as another job done
// (noteScaleSetRunnerEnd).
func (p *scaleSetDemand) markScaleSetJobsDone(m ScaleSetMessage) {
	var names []string
	for _, e := range m.Jobs {
		if e.Event == ScaleSetJobCompleted && e.RunnerName != "" {
			names = append(names, e.RunnerName)
		}
	}
	p.markLeaving(names, p.scaleSetRanUnseenOn)
}

// noteScaleSetRunnerEnd remembers a runner that ended after running a job no message has named
// it at yet (ScaleSetFinishedUnseen), so the pool starts no runner for that job meanwhile. A
// runner a message named (its job running in the ledger, or completed: JobDone) is counted
// by the ledger already.
func (p *scaleSetDemand) noteScaleSetRunnerEnd(r PoolRunner, rep RunnerStateReport) {
	st := p.st.ScaleSet
	ranJob := rep.Reason == EndReasonPodSucceeded || rep.Reason == EndReasonJobCompleted
	if st == nil || !p.st.Spec.IsEphemeral() || rep.State != RunnerDone || !ranJob || r.JobDone ||
		slices.ContainsFunc(st.Ledger.Running, func(j ScaleSetRunningJob) bool { return j.RunnerName == r.Name }) ||
		!p.scaleSetRanUnseenOn() {
		return
	}
	now := workflow.Now(p.ctx)
	st.Finished = append(slices.DeleteFunc(st.Finished, func(f ScaleSetFinishedRunner) bool {
		return now.Sub(f.At) >= ScaleSetFinishedHold
	}), ScaleSetFinishedRunner{Name: r.Name, At: now})
}

// scaleSetRanUnseenOn reports whether changeScaleSetRanUnseen is in force; the version is asked
// once per run, when first needed.
func (p *scaleSetDemand) scaleSetRanUnseenOn() bool {
	return p.scaleSetOn() && p.ranUnseen.inForce(p.ctx)
}

// scaleSetFinishedWake is when the oldest finished runner's hold lapses (zero: none held), so
// the pool starts a runner then for a job whose message never came.
func (p *scaleSetDemand) scaleSetFinishedWake(now time.Time) time.Time {
	st := p.st.ScaleSet
	if st == nil {
		return time.Time{}
	}
	var wake time.Time
	for _, f := range st.Finished { // only a pool under changeScaleSetRanUnseen has any
		if at := f.At.Add(ScaleSetFinishedHold); at.After(now) && (wake.IsZero() || at.Before(wake)) {
			wake = at
		}
	}
	return wake
}

// onScaleSetListenerEnded takes the listener's end: a set GitHub deleted is created again
// (its jobs went with it, so the ledger starts over); any other end starts a listener again
// after ScaleSetListenerRestartDelay.
func (p *scaleSetDemand) onScaleSetListenerEnded(sig ScaleSetListenerEnded) {
	st := p.st.ScaleSet
	if st == nil || sig.ScaleSetID != st.ScaleSetID {
		return
	}
	st.Listening, st.Error = false, sig.Reason
	if sig.Gone {
		p.logger.Warn("Scale set gone at GitHub; creating it again", "scaleSet", st.ScaleSetID)
		*st = PoolScaleSetState{Recreated: st.Recreated + 1, Error: "the set was deleted at GitHub; created again"}
		return
	}
	p.logger.Warn("Scale-set listener ended", "scaleSet", st.ScaleSetID, "reason", sig.Reason)
	st.RetryAt = workflow.Now(p.ctx).Add(ScaleSetListenerRestartDelay)
}

// want is a scale-set pool's demand for Decide: the set's jobs, each once (or GitHub's assigned
// count when higher), plus the idle runners kept ready, within the bounds. While the pool has no
// set (not created yet, or created again after GitHub deleted it) it starts no runner: a runner
// takes its configuration from the set, and a runner of no set would serve no job.
func (p *scaleSetDemand) want(now time.Time) *Demand {
	st := p.st.ScaleSet
	if !p.scaleSetOn() || st == nil {
		return nil
	}
	b := p.bounds(now)
	done := ScaleSetJobsDone(st.Ledger, p.st.Runners)
	if len(st.Finished) > 0 { // only a pool under changeScaleSetRanUnseen has any
		done += ScaleSetFinishedUnseen(st.Ledger, st.Finished, now)
	}
	want := ScaleSetDemand(st.Ledger, st.assignedNow(), b, done)
	assigned := fmt.Sprint(st.Statistics.AssignedJobs)
	if st.AcquiredSince > 0 {
		assigned += fmt.Sprintf(" + %d acquired since", st.AcquiredSince)
	}
	why := fmt.Sprintf("scale set: max(jobs %d, assigned %s) - done %d + minIdle %d", st.Ledger.Jobs(), assigned, done, b.MinIdle)
	d := &Demand{Want: want, Why: why}
	if st.ScaleSetID == 0 {
		d.StartsHeld = "until the scale set exists"
	}
	return d
}

// status puts the set's part in the pool's status.
func (p *scaleSetDemand) status(out *PoolStatus) {
	if p.st.ScaleSet == nil {
		return
	}
	st := *p.st.ScaleSet
	out.ScaleSet = &st
}

// scaleSetWake is when the set is tried again after a failure (zero: nothing due).
func (p *scaleSetDemand) scaleSetWake() time.Time {
	if st := p.st.ScaleSet; st != nil && !p.working {
		return st.RetryAt
	}
	return time.Time{}
}
