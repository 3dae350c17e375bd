package workflows

import (
	"cmp"
	"slices"
	"time"
)

// ScaleSetLedger is what a scale-set pool has learned from its set's messages: the last message
// it holds, and each job once, by its runner request id. It is workflow state (carried across
// continue-as-new), so a message delivered again, or a listener that starts over, changes
// nothing it already counted.
type ScaleSetLedger struct {
	// LastMessageID is the newest message folded in; the service numbers messages upwards.
	LastMessageID int64 `json:"lastMessageID,omitempty"`
	// Waiting are jobs assigned to the set that no runner started yet, by request id, sorted.
	Waiting []int64 `json:"waiting,omitempty"`
	// Running are jobs a runner of the set runs, sorted by request id.
	Running []ScaleSetRunningJob `json:"running,omitempty"`
	// Completed are the latest completed request ids (at most ScaleSetCompletedKept, oldest
	// first), so a late event of a finished job does not bring it back.
	Completed []int64 `json:"completed,omitempty"`
}

// ScaleSetRunningJob is a job and the runner that runs it.
type ScaleSetRunningJob struct {
	RunnerRequestID int64  `json:"runnerRequestID"`
	RunnerName      string `json:"runnerName"`
}

// Jobs is how many jobs the ledger holds open (waiting or running).
func (l ScaleSetLedger) Jobs() int { return len(l.Waiting) + len(l.Running) }

// scaleSetEventRank orders a message's events by a job's life: the client hands them over
// grouped by type, and a job assigned, started and completed within one message must end
// completed.
func scaleSetEventRank(event string) int {
	switch event {
	case ScaleSetJobAssigned:
		return 0
	case ScaleSetJobStarted:
		return 1
	}
	return 2
}

// ApplyScaleSetMessage folds a message into the ledger and reports whether it was new. A
// message at or below the last one held is a redelivery: the ledger is returned unchanged.
func ApplyScaleSetMessage(l ScaleSetLedger, m ScaleSetMessage) (ScaleSetLedger, bool) {
	if m.ID <= l.LastMessageID {
		return l, false
	}
	out := ScaleSetLedger{
		LastMessageID: m.ID, Waiting: slices.Clone(l.Waiting),
		Running: slices.Clone(l.Running), Completed: slices.Clone(l.Completed),
	}
	events := slices.Clone(m.Jobs)
	slices.SortStableFunc(events, func(a, b ScaleSetJobEvent) int {
		return cmp.Compare(scaleSetEventRank(a.Event), scaleSetEventRank(b.Event))
	})
	for _, e := range events {
		out.apply(e)
	}
	// Empty lists are nil, so a ledger compares and serializes the same however it emptied.
	if len(out.Waiting) == 0 {
		out.Waiting = nil
	}
	if len(out.Running) == 0 {
		out.Running = nil
	}
	return out, true
}

// apply folds one job event in; an event of a job already completed is ignored.
func (l *ScaleSetLedger) apply(e ScaleSetJobEvent) {
	id := e.RunnerRequestID
	if slices.Contains(l.Completed, id) {
		return
	}
	running := slices.IndexFunc(l.Running, func(r ScaleSetRunningJob) bool { return r.RunnerRequestID == id })
	switch e.Event {
	case ScaleSetJobAssigned:
		if running < 0 {
			l.Waiting = insertSorted(l.Waiting, id)
		}
	case ScaleSetJobStarted:
		l.Waiting = slices.DeleteFunc(l.Waiting, func(w int64) bool { return w == id })
		if running >= 0 {
			l.Running[running].RunnerName = e.RunnerName
			return
		}
		l.Running = append(l.Running, ScaleSetRunningJob{RunnerRequestID: id, RunnerName: e.RunnerName})
		slices.SortFunc(l.Running, func(a, b ScaleSetRunningJob) int { return cmp.Compare(a.RunnerRequestID, b.RunnerRequestID) })
	case ScaleSetJobCompleted:
		l.Waiting = slices.DeleteFunc(l.Waiting, func(w int64) bool { return w == id })
		if running >= 0 {
			l.Running = slices.Delete(l.Running, running, running+1)
		}
		l.Completed = append(l.Completed, id)
		if n := len(l.Completed) - ScaleSetCompletedKept; n > 0 {
			l.Completed = slices.Delete(l.Completed, 0, n)
		}
	}
}

// ApplyScaleSetAcquired folds in the jobs the listener acquired for the set (GHES's flow): the
// service's answer to an acquisition assigns them to the set, so each is waiting from then on,
// though its assigned message can come many messages later, queued behind the offers sent
// before it (a burst offers hundreds). Folded in with the message that led to the
// acquisition, they keep the ledger ahead of the statistics, as the assigned messages of
// github.com's flow do; without them the pool scales on the statistics alone, less the jobs
// done that the statistics no longer count either (ScaleSetDemand), and lets go of the runners
// those jobs wait for. A job already running keeps its runner; a job the ledger completed was
// taken back and is assigned again now (the client's README, "Job Reassignment"), so it is
// open again. The assigned message that follows changes nothing more.
func ApplyScaleSetAcquired(l ScaleSetLedger, acquired []int64) ScaleSetLedger {
	out := l
	out.Waiting = slices.Clone(l.Waiting)
	reopened := map[int64]bool{}
	for _, id := range acquired {
		if slices.ContainsFunc(l.Running, func(r ScaleSetRunningJob) bool { return r.RunnerRequestID == id }) {
			continue
		}
		reopened[id] = slices.Contains(l.Completed, id)
		out.Waiting = insertSorted(out.Waiting, id)
	}
	if slices.ContainsFunc(l.Completed, func(id int64) bool { return reopened[id] }) {
		out.Completed = slices.DeleteFunc(slices.Clone(l.Completed), func(id int64) bool { return reopened[id] })
	}
	if len(out.Waiting) == 0 {
		out.Waiting = nil
	}
	return out
}

func insertSorted(ids []int64, id int64) []int64 {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(ids, i, id)
}

// ScaleSetDemand is how many runners a scale-set pool wants: its open jobs, each counted once,
// or GitHub's assigned count when that is higher (jobs assigned before the ledger began, under
// an earlier session), plus the idle runners kept ready for the next job, within the bounds.
// GitHub's count is only a hint: it arrives with every message, so a count that fell is taken
// at the next one, and it can never raise the pool above its maximum. Done jobs (ScaleSetJobsDone)
// are running jobs whose runner is finished with them: their completed message may still be on
// its way, but they need no runner, in the ledger's count or in GitHub's.
func ScaleSetDemand(l ScaleSetLedger, stats ScaleSetStatistics, b Bounds, done int) int {
	jobs := max(l.Jobs(), stats.AssignedJobs) - done
	return min(max(jobs+b.MinIdle, b.Min), b.Max)
}

// SessionStatisticsStale reports whether the statistics a session opened with (opened, the
// session's id) are older than those the pool holds, taken from a message of held's session.
// The listener hands a session's opening statistics over before it polls that session, so
// any message of the same session was answered later; the pool can still take the message
// first, when both reach it in one workflow task (each signal name has its own handler), and
// the opening statistics would then put back jobs the message completed. Statistics of an
// earlier session's message, or none (held empty), are older than a new session's opening.
func SessionStatisticsStale(held, opened string) bool {
	return held != "" && held == opened
}

// ScaleSetJobsDone counts the ledger's running jobs whose runner is leaving or gone from the
// pool: an ephemeral runner leaves when its job ends, often before the service says so.
func ScaleSetJobsDone(l ScaleSetLedger, runners []PoolRunner) int {
	n := 0
	for _, j := range l.Running {
		if j.RunnerName == "" {
			continue
		}
		i := slices.IndexFunc(runners, func(r PoolRunner) bool { return r.Name == j.RunnerName })
		if i < 0 {
			n++
			continue
		}
		r := runners[i]
		if r.State.Terminal() || r.Draining || r.State == RunnerDraining || r.Removing {
			n++
		}
	}
	return n
}

// ScaleSetFinishedRunner is a runner of the pool that ended after running a job, while no
// message had named it at any job: when it ended.
type ScaleSetFinishedRunner struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

// ScaleSetFinishedUnseen counts the finished runners whose job the ledger still holds open
// under no runner: an ephemeral runner can take a job, run it and end before the message that
// says it started arrives (the listener hands messages over every few seconds), and its job,
// still waiting in the ledger, needs no other runner. Runners the ledger already names at a
// running job are ScaleSetJobsDone's; ends older than ScaleSetFinishedHold no longer count (a
// message that never came cannot hold a job's runner back for longer); and there are never
// more than the ledger's waiting jobs.
func ScaleSetFinishedUnseen(l ScaleSetLedger, finished []ScaleSetFinishedRunner, now time.Time) int {
	n := 0
	for _, f := range finished {
		named := slices.ContainsFunc(l.Running, func(j ScaleSetRunningJob) bool { return j.RunnerName == f.Name })
		if !named && now.Sub(f.At) < ScaleSetFinishedHold {
			n++
		}
	}
	return min(n, len(l.Waiting))
}

// ForgetNamedRunners drops the finished runners a message names (their job started or
// completed: the ledger counts it from now on) and those past ScaleSetFinishedHold.
func ForgetNamedRunners(finished []ScaleSetFinishedRunner, m ScaleSetMessage, now time.Time) []ScaleSetFinishedRunner {
	out := slices.DeleteFunc(slices.Clone(finished), func(f ScaleSetFinishedRunner) bool {
		return now.Sub(f.At) >= ScaleSetFinishedHold ||
			slices.ContainsFunc(m.Jobs, func(e ScaleSetJobEvent) bool { return e.RunnerName == f.Name })
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// ReopenReassigned opens again the jobs a new message assigns after an earlier one completed
// them: the service cancels a job no runner acquired in time (a completed message, result
// canceled) and assigns it again, up to three times (the client's README, "Job
// Reassignment"). A job completed and assigned in the same message stays completed: the
// client groups a message's events by type, so their order is lost, and the statistics still
// count a job that was in fact assigned again. Apply it before ApplyScaleSetMessage.
func ReopenReassigned(l ScaleSetLedger, m ScaleSetMessage) ScaleSetLedger {
	if m.ID <= l.LastMessageID || len(l.Completed) == 0 {
		return l
	}
	completedNow := map[int64]bool{}
	for _, e := range m.Jobs {
		if e.Event == ScaleSetJobCompleted {
			completedNow[e.RunnerRequestID] = true
		}
	}
	reopened := map[int64]bool{}
	for _, e := range m.Jobs {
		if e.Event == ScaleSetJobAssigned && !completedNow[e.RunnerRequestID] && slices.Contains(l.Completed, e.RunnerRequestID) {
			reopened[e.RunnerRequestID] = true
		}
	}
	if len(reopened) == 0 {
		return l
	}
	out := l
	out.Completed = slices.DeleteFunc(slices.Clone(l.Completed), func(id int64) bool { return reopened[id] })
	return out
}

// BoundScaleSetLedger keeps the ledger from holding more jobs than the statistics' assigned
// count (waiting and running) for longer than ScaleSetLedgerExcessHold. The statistics are the
// truth (the client's README): a message can be lost to a truncated backlog, set aside by a
// cursor a new session's ids fall under, or a reassigned job's messages go to another set,
// and the ledger, which only messages correct, would hold such a job for ever. Over counts are
// allowed for the hold (the ledger leads the statistics by a message or two in a burst); past
// it the oldest waiting jobs, those a runner would have taken first, then the oldest running
// ones, are let go, down to the count. since is when the excess began (zero: none); the
// answer carries the ledger and the new since.
func BoundScaleSetLedger(l ScaleSetLedger, stats ScaleSetStatistics, since, now time.Time) (ScaleSetLedger, time.Time) {
	excess := l.Jobs() - stats.AssignedJobs
	switch {
	case excess <= 0:
		return l, time.Time{}
	case since.IsZero():
		return l, now
	case now.Sub(since) < ScaleSetLedgerExcessHold:
		return l, since
	}
	out := l
	waiting := min(excess, len(l.Waiting))
	out.Waiting = slices.Clone(l.Waiting[waiting:])
	running := excess - waiting
	out.Running = slices.Clone(l.Running[running:])
	if len(out.Waiting) == 0 {
		out.Waiting = nil
	}
	if len(out.Running) == 0 {
		out.Running = nil
	}
	return out, time.Time{}
}
