package poolcli

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

// SetPlace is where a job stands in a scale set. A set knows a job by its runner request id
// only: the set's messages carry no job id of GitHub's REST API.
type SetPlace string

// The places, in a job's order. SetUnknown: the set does not hold the job by that id.
const (
	SetUnknown SetPlace = ""
	// SetOffered: the service offered the set the job (GHES) and the listener has not
	// acquired it.
	SetOffered SetPlace = "offered"
	// SetAcquired: the service gave the set the job (acquired, or assigned) and the pool has
	// not taken that message yet.
	SetAcquired SetPlace = "acquired"
	// SetAssigned: the pool's ledger holds the job and no runner of the set started it.
	SetAssigned  SetPlace = "assigned"
	SetRunning   SetPlace = "running"
	SetCompleted SetPlace = "completed"
)

// ScaleSetFacts is a scale-set pool's set as `why` read it: the pool's hold on the set (its
// status), the listener's pending work when read, and where the job stands in the set.
type ScaleSetFacts struct {
	Pool    string `json:"pool"`
	SetName string `json:"setName"`
	// Labels are those a job's runs-on must all be among to reach the set: the pool's, or the
	// set's name alone where the service kept only that.
	Labels []string                    `json:"labels,omitempty"`
	Set    workflows.PoolScaleSetState `json:"set"`
	// Listener is the set's listener workflow, read when the pool's ledger does not hold the
	// job.
	Listener *ListenerFacts `json:"listener,omitempty"`
	// OffersRead: the listener's history was read for an offer of the job, so Job says
	// whether the set was offered it.
	OffersRead bool   `json:"offersRead,omitempty"`
	Job        SetJob `json:"job"`
}

// SetJob is the job's place in a set and, for an offer, what the listener did with it.
type SetJob struct {
	Place SetPlace `json:"place,omitempty"`
	// Runner is the runner the set's messages name at the running job.
	Runner string `json:"runner,omitempty"`
	// OfferedAt is when the listener heard the offer; with OfferCarried, when its run began
	// (the offer came with the run, from an earlier one).
	OfferedAt    time.Time `json:"offeredAt,omitzero"`
	OfferCarried bool      `json:"offerCarried,omitempty"`
	// Acquire is the listener's last acquisition of the job.
	Acquire *Acquisition `json:"acquire,omitempty"`
}

// AcquireOutcome is how the listener's acquisition of an offered job ended.
type AcquireOutcome string

// The outcomes. AcquireNotGiven: the service answered and gave the set other jobs than this
// one (another set took it, or it ended).
const (
	AcquirePending  AcquireOutcome = "pending"
	AcquireDone     AcquireOutcome = "acquired"
	AcquireNotGiven AcquireOutcome = "not-given"
	AcquireFailed   AcquireOutcome = "failed"
)

// Acquisition is one acquisition of the job by the listener.
type Acquisition struct {
	At      time.Time      `json:"at"`
	Outcome AcquireOutcome `json:"outcome"`
	Failure string         `json:"failure,omitempty"`
}

// ListenerFacts is a set's listener workflow as its description shows it.
type ListenerFacts struct {
	WorkflowID string `json:"workflowId"`
	// Closed: no run of the workflow is open (it ended and the pool has not heard yet).
	Closed bool `json:"closed,omitempty"`
	// Activities are its pending activities: its poll, or a session being opened.
	Activities []PendingActivity `json:"activities,omitempty"`
}

// sessionWorkerShownAfter: a listener's activity starts within milliseconds on a live worker;
// one not started this long after it was scheduled waits for a worker that is gone (the one
// holding the session) or that no process runs.
const sessionWorkerShownAfter = 5 * time.Second

// name is how a person knows the set: its name at GitHub and, once created, its id.
func (s *ScaleSetFacts) name() string {
	if s.Set.ScaleSetID == 0 {
		return fmt.Sprintf("scale set %q", s.SetName)
	}
	return fmt.Sprintf("scale set %q (id %d)", s.SetName, s.Set.ScaleSetID)
}

// scaleSetCause judges a job a scale set knows (f.ScaleSet, of pool f.Pool): running or over,
// waiting in the pool's ledger (judged as any held job: the pool, the runner it waits for,
// the bounds), on its way to the pool, or offered and not acquired.
func scaleSetCause(f WhyFacts) Verdict {
	s := f.ScaleSet
	set, j := s.name(), s.Job
	switch j.Place {
	case SetRunning:
		return Verdict{CauseNone, fmt.Sprintf("running on %s (%s)", cmp.Or(j.Runner, "a runner of the set"), set)}
	case SetCompleted:
		return Verdict{CauseNone, fmt.Sprintf("completed, as %s's messages said", set)}
	case SetAssigned:
		v := poolCause(f)
		v.Detail = fmt.Sprintf("%s has it assigned; %s", set, v.Detail)
		if v.Cause == CauseAtMax || v.Cause == CauseOverride {
			v.Detail += "; it waits for one of them to end"
		}
		return v
	case SetAcquired:
		return Verdict{CauseScaling, fmt.Sprintf("GitHub gave %s the job; the listener hands that message to pool %s next", set, s.Pool)}
	case SetUnknown:
		c, d := s.notHolding(f.Now)
		return Verdict{c, d}
	}
	offered := fmt.Sprintf("offered to %s at %s, not acquired", set, clock(j.OfferedAt))
	if j.OfferCarried {
		offered = fmt.Sprintf("offered to %s before %s, not acquired", set, clock(j.OfferedAt))
	}
	if v, ok := listenerCause(s, f.Now); ok { // an offer is acquired only through a session
		v.Detail = offered + ": " + v.Detail
		return v
	}
	return Verdict{CauseSetOffered, offered + offerWait(s)}
}

// offerWait says what an offer the listener holds waits for: it acquires offers with each
// message while the set has room (its maximum above its assigned jobs).
func offerWait(s *ScaleSetFacts) string {
	st, a := s.Set.Statistics, s.Job.Acquire
	switch {
	case a != nil && a.Outcome == AcquireFailed:
		return fmt.Sprintf(": acquiring it failed at %s (%s); the listener tries again with the set's next message", clock(a.At), a.Failure)
	case a != nil && a.Outcome == AcquirePending:
		return fmt.Sprintf(" yet: the listener is acquiring it since %s", clock(a.At))
	case st.AssignedJobs >= s.Set.ListenerMax:
		return fmt.Sprintf(": the set has %d assigned of its maximum %d and the listener acquires offers only while it has room; it waits for one of them to end",
			st.AssignedJobs, s.Set.ListenerMax)
	}
	return fmt.Sprintf(" yet: the listener acquires it with the set's next message (%d assigned of its maximum %d)", st.AssignedJobs, s.Set.ListenerMax)
}

// listenerCause says why nothing hears the set's messages, if so: no set yet, no listener,
// or a listener without a session (refused, or its worker gone).
func listenerCause(s *ScaleSetFacts, now time.Time) (Verdict, bool) {
	st, set := s.Set, s.name()
	switch {
	case st.ScaleSetID == 0:
		return Verdict{CauseSetNotListening, fmt.Sprintf("pool %s has no scale set yet: %s", s.Pool, retrying(st, "it is being created"))}, true
	case !st.Listening:
		return Verdict{CauseSetNotListening, fmt.Sprintf("%s has no listener: %s", set, retrying(st, "one is being started"))}, true
	case s.Listener == nil:
		return Verdict{}, false
	case s.Listener.Closed:
		return Verdict{CauseSetNotListening, fmt.Sprintf("%s's listener %s is not running; pool %s starts another once it hears of its end",
			set, s.Listener.WorkflowID, s.Pool)}, true
	}
	for _, a := range s.Listener.Activities {
		late := !a.Started && now.Sub(a.Scheduled) >= sessionWorkerShownAfter
		switch {
		case a.Type == workflows.ActivityOpenScaleSetSession && (a.Attempt > 1 || a.Failure != ""):
			return Verdict{CauseSetNotListening, fmt.Sprintf("%s has no session: opening one is at attempt %d (%s); next try %s",
				set, a.Attempt, cmp.Or(a.Failure, "no reason given"), clock(a.NextAttempt))}, true
		case a.Type == workflows.ActivityOpenScaleSetSession && late:
			return Verdict{CauseSetNotListening, fmt.Sprintf("%s has no session: opening one waits since %s for a worker to take it", set, clock(a.Scheduled))}, true
		case a.Type == workflows.ActivityPollScaleSet && late:
			return Verdict{CauseSetNotListening, fmt.Sprintf("%s's listener waits since %s for the worker holding its session, which is gone; it opens a new session when that wait times out",
				set, clock(a.Scheduled))}, true
		}
	}
	return Verdict{}, false
}

// retrying is the set's last error and when the pool tries again, or idle when there is none.
func retrying(st workflows.PoolScaleSetState, idle string) string {
	if st.Error == "" {
		return idle
	}
	return fmt.Sprintf("%s; tried again at %s", st.Error, clock(st.RetryAt))
}

// setsNotHolding judges a job no pool holds when every pool is a scale set's: each set says
// why it would not have the job yet, and the cause is theirs when they agree.
func setsNotHolding(sets []ScaleSetFacts, now time.Time) Verdict {
	var cause Cause
	parts := make([]string, 0, len(sets))
	for i, s := range sets {
		c, d := s.notHolding(now)
		if len(sets) > 1 {
			d = fmt.Sprintf("pool %s: %s", s.Pool, d)
		}
		if i == 0 {
			cause = c
		} else if c != cause {
			cause = CauseSetNotAssigned
		}
		parts = append(parts, d)
	}
	return Verdict{cause, "no scale set holds the job: " + strings.Join(parts, "; ")}
}

// notHolding says why the set does not hold the job by this id: nothing hears the set, the
// service did not give it when acquired, the set is full (GitHub assigns a set no more jobs
// than its maximum), or GitHub has not sent it. The set's jobs that no runner started are
// named by request id: the job may be one of them under the id the set knows it by.
func (s ScaleSetFacts) notHolding(now time.Time) (Cause, string) {
	st, set := s.Set.Statistics, s.name()
	var c Cause
	var d string
	if v, ok := listenerCause(&s, now); ok {
		c, d = v.Cause, v.Detail
	} else if a := s.Job.Acquire; a != nil && a.Outcome == AcquireNotGiven {
		c, d = CauseSetNotAssigned, fmt.Sprintf("%s was offered it, but when its listener acquired it at %s the service gave it to the set no more (another set took it, or it ended)",
			set, clock(a.At))
	} else if st.AssignedJobs >= s.Set.ListenerMax {
		c, d = CauseAtMax, fmt.Sprintf("%s has %d assigned of its maximum %d: GitHub assigns a set no more than its maximum, so the job waits at GitHub for one of them to end",
			set, st.AssignedJobs, s.Set.ListenerMax)
	} else {
		c, d = CauseSetNotAssigned, fmt.Sprintf("GitHub has not sent it to %s (last message %s, %d assigned of its maximum %d): "+
			"the service sends a set its jobs seconds after they are queued, and never one whose runs-on are not all among the set's labels %v",
			set, clock(s.Set.MessageAt), st.AssignedJobs, s.Set.ListenerMax, s.Labels)
	}
	if w := s.Set.Ledger.Waiting; len(w) > 0 {
		d += fmt.Sprintf("; it holds %d job(s) no runner has started, by runner request id %v (`starter why <request id>` explains one)",
			len(w), w[:min(len(w), 5)])
	}
	return c, d
}
