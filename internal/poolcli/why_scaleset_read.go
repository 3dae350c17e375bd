package poolcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/runnerflow/runnerflow/workflows"
)

// maxListenerReads bounds the listeners `why` reads for a job no scale set's ledger holds (a
// description each, and the current run's history where its set has offers).
const maxListenerReads = 5

// scaleSetOf is a scale-set pool's set as `why` judges it, with the labels jobs reach it by and
// the job's place in the pool's ledger.
func scaleSetOf(st *workflows.PoolStatus, job int64) ScaleSetFacts {
	name := st.Spec.Name
	if st.Spec.ScaleSet != nil && st.Spec.ScaleSet.Name != "" {
		name = st.Spec.ScaleSet.Name
	}
	labels := st.Spec.Labels
	if st.ScaleSet.NameOnlyLabels { // the service kept only the set's name: runs-on must name the set
		labels = []string{name}
	}
	return ScaleSetFacts{Pool: st.Name, SetName: name, Labels: labels, Set: *st.ScaleSet,
		Job: ledgerPlace(st.ScaleSet.Ledger, job)}
}

// ledgerPlace is where the pool's ledger has the job, by its runner request id.
func ledgerPlace(l workflows.ScaleSetLedger, job int64) SetJob {
	if _, found := slices.BinarySearch(l.Waiting, job); found {
		return SetJob{Place: SetAssigned}
	}
	if i := slices.IndexFunc(l.Running, func(r workflows.ScaleSetRunningJob) bool { return r.RunnerRequestID == job }); i >= 0 {
		return SetJob{Place: SetRunning, Runner: l.Running[i].RunnerName}
	}
	if slices.Contains(l.Completed, job) {
		return SetJob{Place: SetCompleted}
	}
	return SetJob{}
}

// placeInScaleSets finds the scale set that knows the job: in its pool's ledger, else (for at
// most maxListenerReads sets) in its listener's offers. The set found becomes f.ScaleSet, its
// pool f.Pool. The listeners read are described in f.ScaleSets either way.
func placeInScaleSets(ctx context.Context, c client.Client, f *WhyFacts, pools []workflows.PoolStatus, job int64) error {
	found := slices.IndexFunc(f.ScaleSets, func(s ScaleSetFacts) bool { return s.Job.Place != SetUnknown })
	for i := 0; found < 0 && i < min(len(f.ScaleSets), maxListenerReads); i++ {
		if err := readListener(ctx, c, &f.ScaleSets[i], job); err != nil {
			return err
		}
		if f.ScaleSets[i].Job.Place != SetUnknown {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	f.ScaleSet = &f.ScaleSets[found]
	p := slices.IndexFunc(pools, func(st workflows.PoolStatus) bool { return st.Name == f.ScaleSet.Pool })
	f.Pool = &pools[p]
	return nil
}

// readListener reads the set's listener: its description (its session being opened, its
// poll), and, when the set has offers, its current run's history for an offer of the job.
func readListener(ctx context.Context, c client.Client, s *ScaleSetFacts, job int64) error {
	if s.Set.ScaleSetID == 0 || !s.Set.Listening {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	lf := &ListenerFacts{WorkflowID: workflows.ScaleSetListenerWorkflowID(s.Pool, s.Set.ScaleSetID)}
	s.Listener = lf
	desc, err := c.DescribeWorkflowExecution(ctx, lf.WorkflowID, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		lf.Closed = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("listener %s: %w", lf.WorkflowID, err)
	}
	lf.Closed = desc.GetWorkflowExecutionInfo().GetCloseTime() != nil
	for _, a := range desc.GetPendingActivities() {
		lf.Activities = append(lf.Activities, pendingActivity(a))
	}
	if lf.Closed || s.Set.Statistics.AvailableJobs == 0 {
		return nil
	}
	scan := newOfferScan(job)
	iter := c.GetWorkflowHistory(ctx, lf.WorkflowID, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(),
		false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return fmt.Errorf("listener %s's history: %w", lf.WorkflowID, err)
		}
		scan.add(ev)
	}
	s.Job, s.OffersRead = scan.out, true
	return nil
}

// offerScan follows one job (by runner request id) through a listener run's history: an
// offer carried into the run (its input's state), the offers and assignments its polls
// brought, and the acquisitions it tried. The listener keeps its offers in its own state,
// which no query answers; its history holds every step that state was made of.
type offerScan struct {
	job      int64
	polls    map[int64]bool // scheduled event ids of polls not yet answered
	acquires map[int64]bool // scheduled event ids of acquisitions of the job
	out      SetJob
}

func newOfferScan(job int64) *offerScan {
	return &offerScan{job: job, polls: map[int64]bool{}, acquires: map[int64]bool{}}
}

// add takes the run's next event.
func (s *offerScan) add(ev *historypb.HistoryEvent) {
	at := ev.GetEventTime().AsTime()
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		var in workflows.ScaleSetListenerInput
		if decode(ev.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in) && in.State != nil && slices.Contains(in.State.Offered, s.job) {
			s.out = SetJob{Place: SetOffered, OfferedAt: at, OfferCarried: true}
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := ev.GetActivityTaskScheduledEventAttributes()
		switch a.GetActivityType().GetName() {
		case workflows.ActivityPollScaleSet:
			s.polls[ev.GetEventId()] = true
		case workflows.ActivityAcquireScaleSetJobs:
			var in workflows.AcquireScaleSetJobsInput
			if decode(a.GetInput(), &in) && slices.Contains(in.RunnerRequestIDs, s.job) {
				s.acquires[ev.GetEventId()] = true
				s.out.Acquire = &Acquisition{At: at, Outcome: AcquirePending}
			}
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := ev.GetActivityTaskCompletedEventAttributes()
		id := a.GetScheduledEventId()
		if s.polls[id] {
			s.polled(a.GetResult(), ev)
		} else if s.acquires[id] {
			s.acquired(a.GetResult())
		}
		delete(s.polls, id)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := ev.GetActivityTaskFailedEventAttributes()
		s.failed(a.GetScheduledEventId(), a.GetFailure().GetMessage())
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		a := ev.GetActivityTaskTimedOutEventAttributes()
		s.failed(a.GetScheduledEventId(), a.GetFailure().GetMessage())
	}
}

// polled takes a poll's message: the job offered (a redelivered offer keeps its first time),
// given to the set, or over.
func (s *offerScan) polled(result *commonpb.Payloads, ev *historypb.HistoryEvent) {
	if !mentions(result, s.job) {
		return
	}
	var out workflows.PollScaleSetOutput
	if !decode(result, &out) || out.Message == nil {
		return
	}
	for _, e := range out.Message.Jobs {
		if e.RunnerRequestID != s.job {
			continue
		}
		switch e.Event {
		case workflows.ScaleSetJobAvailable:
			if s.out.Place != SetOffered {
				s.out = SetJob{Place: SetOffered, OfferedAt: ev.GetEventTime().AsTime()}
			}
		case workflows.ScaleSetJobCompleted:
			s.out.Place = SetCompleted
		default:
			s.out.Place = SetAcquired
		}
	}
}

// acquired takes an acquisition's answer: the jobs the service gave the set. The listener
// keeps no offer it asked for and was not given.
func (s *offerScan) acquired(result *commonpb.Payloads) {
	var out workflows.AcquireScaleSetJobsOutput
	if s.out.Acquire == nil || !decode(result, &out) {
		return
	}
	given := slices.Contains(out.Acquired, s.job)
	s.out.Acquire.Outcome = AcquireNotGiven
	if given {
		s.out.Acquire.Outcome = AcquireDone
	}
	if s.out.Place == SetOffered {
		s.out.Place = SetUnknown
		if given {
			s.out.Place = SetAcquired
		}
	}
}

// failed takes an activity's failure: an acquisition of the job that failed leaves the offer
// with the listener, to be tried with the next message.
func (s *offerScan) failed(scheduled int64, msg string) {
	delete(s.polls, scheduled)
	if s.acquires[scheduled] && s.out.Acquire != nil {
		s.out.Acquire.Outcome, s.out.Acquire.Failure = AcquireFailed, msg
	}
}

// mentions is a cheap look for the job's number in a payload, before decoding it.
func mentions(p *commonpb.Payloads, job int64) bool {
	n := []byte(strconv.FormatInt(job, 10))
	return slices.ContainsFunc(p.GetPayloads(), func(pl *commonpb.Payload) bool { return bytes.Contains(pl.GetData(), n) })
}

func decode(p *commonpb.Payloads, v any) bool {
	return p != nil && converter.GetDefaultDataConverter().FromPayloads(p, v) == nil
}

// setRunner is the runner a job of the set waits for or runs on: the starting runner paired
// with it while it waits in the ledger, the runner the set names once it runs.
func setRunner(st *workflows.PoolStatus, j SetJob, job int64) *workflows.PoolRunner {
	switch j.Place {
	case SetAssigned:
		return setPairedRunner(st, job)
	case SetRunning:
		if i := slices.IndexFunc(st.Runners, func(r workflows.PoolRunner) bool { return r.Name == j.Runner }); i >= 0 {
			return &st.Runners[i]
		}
	}
	return nil
}

// setPairedRunner is the starting runner paired with a job waiting in the pool's ledger: the
// pool's starting runners go to its waiting reservations first, then to the ledger's jobs,
// oldest (lowest request id) first.
func setPairedRunner(st *workflows.PoolStatus, job int64) *workflows.PoolRunner {
	if st.ScaleSet == nil {
		return nil
	}
	rank, found := slices.BinarySearch(st.ScaleSet.Ledger.Waiting, job)
	rank += len(waitingJobs(st))
	starting := startingRunners(st)
	if !found || rank >= len(starting) {
		return nil
	}
	return &starting[rank]
}
