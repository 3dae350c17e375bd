package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the types and the pure decisions of reconcile's redelivery of failed webhook
// deliveries: GitHub never redelivers a failed delivery by itself, and its documentation tells
// integrators to list the hook's deliveries and redeliver the failed ones. Every attempt to
// deliver one event shares the event's guid (GitHub's X-GitHub-Delivery); a redelivery is a new
// attempt with the same guid and its `redelivery` flag set.

// Activities of reconcile's redelivery, on the GitHub task queue.
const (
	// ActivityListHookDeliveries lists the configured hook's delivery attempts back to a time
	// (GitHub's cursor pagination, newest first) and summarises them (SummarizeDeliveries).
	ActivityListHookDeliveries = "ListHookDeliveries"
	// ActivityRedeliverHookDelivery asks GitHub for one more attempt of a delivery (one POST).
	ActivityRedeliverHookDelivery = "RedeliverHookDelivery"
	// ActivityPingHook asks GitHub to ping an organization's or a repository's hook (one POST):
	// a delivery whose loss costs nothing, sent to learn whether the receiver answers again.
	ActivityPingHook = "PingHook"
)

// EventWorkflowJob is the one webhook event runnerflow acts on, and the only one it redelivers.
const EventWorkflowJob = "workflow_job"

// HookRef names the webhook whose failed deliveries reconcile redelivers: the GitHub App's own
// webhook, or an organization's or a repository's hook by id. The zero value is no hook.
type HookRef struct {
	// App is the webhook of the GitHub App the worker authenticates as.
	App bool `json:"app,omitempty"`
	// Organization or Repository ("owner/repo") owns the hook ID.
	Organization string `json:"organization,omitempty"`
	Repository   string `json:"repository,omitempty"`
	ID           int64  `json:"id,omitempty"`
}

// IsZero reports whether no hook is named (redelivery is off).
func (h HookRef) IsZero() bool { return h == HookRef{} }

// CanPing reports whether GitHub can ping the hook: organization and repository hooks have a
// ping endpoint, an App's webhook has none.
func (h HookRef) CanPing() bool { return !h.IsZero() && !h.App }

// String renders the hook as ParseHookRef reads it: "app", "org:acme/12", "repo:acme/app/12".
func (h HookRef) String() string {
	switch {
	case h.App:
		return "app"
	case h.Organization != "":
		return fmt.Sprintf("org:%s/%d", h.Organization, h.ID)
	case h.Repository != "":
		return fmt.Sprintf("repo:%s/%d", h.Repository, h.ID)
	}
	return ""
}

// Validate checks that exactly one kind of hook is named, with an id where one is needed.
func (h HookRef) Validate() error {
	owners := 0
	for _, set := range []bool{h.App, h.Organization != "", h.Repository != ""} {
		if set {
			owners++
		}
	}
	switch {
	case owners != 1:
		return errors.New("name one hook: the App's, an organization's or a repository's")
	case h.App && h.ID != 0:
		return errors.New("the App's hook takes no id")
	case !h.App && h.ID <= 0:
		return errors.New("an organization or repository hook needs its id (X-GitHub-Hook-ID)")
	case h.Repository != "" && strings.Count(h.Repository, "/") != 1:
		return fmt.Errorf("repository %q is not owner/repo", h.Repository)
	}
	return nil
}

// ParseHookRef reads "app", "org:<org>/<hook id>" or "repo:<owner>/<repo>/<hook id>"; "" and
// "none" are no hook.
func ParseHookRef(s string) (HookRef, error) {
	if s == "" || s == "none" {
		return HookRef{}, nil
	}
	if s == "app" {
		return HookRef{App: true}, nil
	}
	kind, rest, _ := strings.Cut(s, ":")
	i := strings.LastIndex(rest, "/")
	id, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if i < 0 || err != nil {
		return HookRef{}, fmt.Errorf("hook %q: want app, org:<org>/<hook id> or repo:<owner>/<repo>/<hook id>", s)
	}
	var h HookRef
	switch kind {
	case "org":
		h = HookRef{Organization: rest[:i], ID: id}
	case "repo":
		h = HookRef{Repository: rest[:i], ID: id}
	default:
		return HookRef{}, fmt.Errorf("hook %q: want app, org:<org>/<hook id> or repo:<owner>/<repo>/<hook id>", s)
	}
	if err := h.Validate(); err != nil {
		return HookRef{}, fmt.Errorf("hook %q: %w", s, err)
	}
	return h, nil
}

// HookAttempt is one delivery attempt as GitHub lists it (hook-delivery-item).
type HookAttempt struct {
	// ID addresses the attempt (POST …/deliveries/{ID}/attempts redelivers its payload).
	ID   int64
	GUID string
	At   time.Time
	// Redelivery is GitHub's flag: the attempt was a redelivery (by anyone).
	Redelivery bool
	// StatusCode is the receiver's answer; 0 when it gave none (GitHub could not connect).
	StatusCode int
	Event      string
	Action     string
}

// Succeeded uses GitHub's own classification (the deliveries listing's status=success filter):
// a status code from 200 to 399.
func (a HookAttempt) Succeeded() bool { return a.StatusCode >= 200 && a.StatusCode < 400 }

// FailedEvent is one event none of whose listed attempts succeeded.
type FailedEvent struct {
	GUID   string `json:"guid"`
	Event  string `json:"event"`
	Action string `json:"action,omitempty"`
	// DeliveryID is its newest attempt, the one to redeliver (every attempt carries the same
	// payload).
	DeliveryID int64 `json:"deliveryId"`
	// FailedAt is the time of its first listed attempt; StatusCode the newest attempt's answer.
	FailedAt   time.Time `json:"failedAt"`
	StatusCode int       `json:"statusCode"`
	// Redelivered: one of its attempts was a redelivery already (runnerflow's or by hand).
	Redelivered bool `json:"redelivered,omitempty"`
}

// DeliverySummary is what reconcile needs from a hook's listing.
type DeliverySummary struct {
	// Listed counts the attempts listed since the window's start.
	Listed int `json:"listed"`
	// Newest is the hook's newest listed attempt (any event): the last word of the receiver.
	Newest *HookAttempt `json:"newest,omitempty"`
	// Failed are the workflow_job events whose every listed attempt failed, oldest first.
	Failed []FailedEvent `json:"failed,omitempty"`
	// ProbeCandidate is a listed attempt that succeeded and whose redelivery costs nothing
	// (probeCandidate): what probes a hook that has no ping.
	ProbeCandidate *HookAttempt `json:"probeCandidate,omitempty"`
}

// SummarizeDeliveries groups attempts by event guid, keeps those attempted since the given time,
// and returns the workflow_job events none of whose attempts succeeded: a later successful
// attempt of the same guid (a redelivery) means there is nothing to do. Other events are not
// redelivered (the intake acts on workflow_job only; redelivering the rest spends the budget
// for nothing) but count as the receiver's answers.
func SummarizeDeliveries(attempts []HookAttempt, since time.Time) DeliverySummary {
	var s DeliverySummary
	byGUID := map[string][]HookAttempt{}
	var order []string
	for _, a := range attempts {
		if a.At.Before(since) {
			continue
		}
		s.Listed++
		if s.Newest == nil || a.At.After(s.Newest.At) || (a.At.Equal(s.Newest.At) && a.ID > s.Newest.ID) {
			newest := a
			s.Newest = &newest
		}
		if betterProbe(a, s.ProbeCandidate) {
			candidate := a
			s.ProbeCandidate = &candidate
		}
		if _, seen := byGUID[a.GUID]; !seen {
			order = append(order, a.GUID)
		}
		byGUID[a.GUID] = append(byGUID[a.GUID], a)
	}
	for _, guid := range order {
		if f, ok := failedEvent(byGUID[guid]); ok {
			s.Failed = append(s.Failed, f)
		}
	}
	slices.SortFunc(s.Failed, func(a, b FailedEvent) int {
		return cmp.Or(a.FailedAt.Compare(b.FailedAt), cmp.Compare(a.GUID, b.GUID))
	})
	return s
}

// probeRank ranks an attempt as a probe of a hook without a ping; 0 is no probe. Only an
// attempt that succeeded qualifies, and the intake answers it again with no effect: an event
// it does not act on (it answers 200 and ignores it) ranks first, then a `queued` workflow_job
// (reservations are keyed by job, and a job that ended within the window is remembered, so a
// repeat reserves nothing). Other actions (in_progress, completed) would reach runner
// workflows again and are never used.
func probeRank(a HookAttempt) int {
	switch {
	case !a.Succeeded():
		return 0
	case a.Event != EventWorkflowJob:
		return 2
	case a.Action == JobQueued:
		return 1
	}
	return 0
}

// betterProbe reports whether a is a better probe than the candidate so far: a higher rank,
// or the same rank and newer.
func betterProbe(a HookAttempt, than *HookAttempt) bool {
	rank := probeRank(a)
	switch {
	case rank == 0:
		return false
	case than == nil:
		return true
	}
	return rank > probeRank(*than) || (rank == probeRank(*than) && a.At.After(than.At))
}

// failedEvent is the event of one guid's attempts if it is a workflow_job none of whose attempts
// succeeded.
func failedEvent(attempts []HookAttempt) (FailedEvent, bool) {
	f := FailedEvent{GUID: attempts[0].GUID, Event: attempts[0].Event, Action: attempts[0].Action}
	if f.Event != EventWorkflowJob {
		return FailedEvent{}, false
	}
	var newest HookAttempt
	for i, a := range attempts {
		if a.Succeeded() {
			return FailedEvent{}, false
		}
		f.Redelivered = f.Redelivered || a.Redelivery
		if i == 0 || a.At.Before(f.FailedAt) {
			f.FailedAt = a.At
		}
		if i == 0 || a.At.After(newest.At) || (a.At.Equal(newest.At) && a.ID > newest.ID) {
			newest = a
		}
	}
	f.DeliveryID, f.StatusCode = newest.ID, newest.StatusCode
	return f, true
}

// RememberedDelivery is an event guid a reconcile run redelivered: carried from run to run in
// the report (the Schedule hands each run its predecessor's result) for as long as the event
// can be listed in the window, so no guid is redelivered twice even before GitHub lists the
// redelivery.
type RememberedDelivery struct {
	GUID string    `json:"guid"`
	At   time.Time `json:"at"`
}

// RedeliveryPlanInput is what PlanRedeliveries decides on.
type RedeliveryPlanInput struct {
	Summary DeliverySummary
	// Remembered are the guids earlier runs redelivered.
	Remembered []RememberedDelivery
	// Limit caps the redeliveries of one run; zero means ReconcileRedeliverMax.
	Limit int
	// CanPing: the hook has GitHub's ping (HookRef.CanPing).
	CanPing bool
	// SpendEvent probes with a failed event itself, as runs before change
	// reconcile-harmless-probe did (replay only).
	SpendEvent bool
}

// ProbeKind says what a run sent to learn whether the hook's receiver answers again.
type ProbeKind string

// The probes, in order of preference.
const (
	// ProbePing: GitHub's ping of an organization's or a repository's hook.
	ProbePing ProbeKind = "ping"
	// ProbeSucceededDelivery: the redelivery of an attempt that succeeded
	// (DeliverySummary.ProbeCandidate), for a hook without a ping.
	ProbeSucceededDelivery ProbeKind = "succeeded-delivery"
	// ProbeNone: no harmless probe exists (an App's webhook with no successful attempt in the
	// window); the failed events wait for the hook's next successful delivery.
	ProbeNone ProbeKind = "none"
	// ProbeFailedEvent: the oldest failed event itself, which the probe spends (runs before
	// change reconcile-harmless-probe).
	ProbeFailedEvent ProbeKind = "failed-event"
)

// RedeliveryPlan is one run's redelivery decision.
type RedeliveryPlan struct {
	// Redeliver are the events to redeliver now, oldest first.
	Redeliver []FailedEvent
	// AlreadyRedelivered counts the failed events redelivered before (GitHub lists a
	// redelivery, or an earlier run remembers one): never redelivered again.
	AlreadyRedelivered int
	// Deferred counts the events left for the next run (the limit, or a probe).
	Deferred int
	// Probe: the hook's newest attempt failed, so the receiver may still be down; ProbeBy says
	// what is sent to find out (ProbeDelivery for ProbeSucceededDelivery), and the next run
	// redelivers the failed events if the probe's attempt succeeded.
	Probe         bool
	ProbeBy       ProbeKind
	ProbeDelivery *HookAttempt
}

// PlanRedeliveries picks the failed events to redeliver: each at most once, and none while the
// receiver's last answer was a failure (a redelivery into a receiver still down would spend the
// event's one redelivery). Then it probes the hook with something whose loss costs nothing:
// a ping, else the redelivery of an attempt that succeeded, else nothing.
func PlanRedeliveries(in RedeliveryPlanInput) RedeliveryPlan {
	limit := in.Limit
	if limit <= 0 {
		limit = ReconcileRedeliverMax
	}
	var p RedeliveryPlan
	var todo []FailedEvent
	for _, f := range in.Summary.Failed {
		remembered := slices.ContainsFunc(in.Remembered, func(r RememberedDelivery) bool { return r.GUID == f.GUID })
		if f.Redelivered || remembered {
			p.AlreadyRedelivered++
			continue
		}
		todo = append(todo, f)
	}
	if len(todo) > 0 && in.Summary.Newest != nil && !in.Summary.Newest.Succeeded() {
		p.Probe, limit = true, 0
		switch {
		case in.SpendEvent:
			p.ProbeBy, limit = ProbeFailedEvent, 1
		case in.CanPing:
			p.ProbeBy = ProbePing
		case in.Summary.ProbeCandidate != nil:
			p.ProbeBy, p.ProbeDelivery = ProbeSucceededDelivery, in.Summary.ProbeCandidate
		default:
			p.ProbeBy = ProbeNone
		}
	}
	p.Redeliver = todo[:min(limit, len(todo))]
	p.Deferred = len(todo) - len(p.Redeliver)
	return p
}

// CarryRemembered keeps the remembered guids still inside the window (older ones can no longer
// be listed, so no run would consider them) and adds this run's, sorted by guid.
func CarryRemembered(prev []RememberedDelivery, added []RememberedDelivery, since time.Time) []RememberedDelivery {
	var out []RememberedDelivery
	for _, r := range slices.Concat(prev, added) {
		if !r.At.Before(since) && !slices.ContainsFunc(out, func(o RememberedDelivery) bool { return o.GUID == r.GUID }) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b RememberedDelivery) int { return cmp.Compare(a.GUID, b.GUID) })
	return out
}

// ListHookDeliveriesInput asks for the hook's attempts back to Since, at most MaxPages pages.
type ListHookDeliveriesInput struct {
	Hook  HookRef   `json:"hook"`
	Since time.Time `json:"since"`
	// MaxPages bounds the pages read; zero means ReconcileDeliveryPages.
	MaxPages int `json:"maxPages,omitempty"`
}

// ListHookDeliveriesResult is the summary of the listing.
type ListHookDeliveriesResult struct {
	DeliverySummary
	// Pages read; Truncated when MaxPages ran out before Since was reached.
	Pages     int  `json:"pages"`
	Truncated bool `json:"truncated,omitempty"`
}

// RedeliverHookDeliveryInput names one attempt to redeliver.
type RedeliverHookDeliveryInput struct {
	Hook       HookRef `json:"hook"`
	DeliveryID int64   `json:"deliveryId"`
	// GUID names the event in the activity's history, so the UI shows which one it was.
	GUID string `json:"guid,omitempty"`
}

// RedeliverHookDeliveryResult says GitHub accepted the redelivery; it has no fields yet.
type RedeliverHookDeliveryResult struct{}

// PingHookInput names the hook to ping (an organization's or a repository's).
type PingHookInput struct {
	Hook HookRef `json:"hook"`
}

// PingHookResult says GitHub accepted the ping; it has no fields yet.
type PingHookResult struct{}

// Redelivery is one event reconcile redelivered (or, in a dry run, would have); Error says why
// GitHub did not take it.
type Redelivery struct {
	FailedEvent
	Error string `json:"error,omitempty"`
}

// DeliveryReport is the redelivery part of a reconcile report.
type DeliveryReport struct {
	Hook string `json:"hook"`
	// Since is the start of the window looked at.
	Since time.Time `json:"since"`
	// Listed counts the attempts listed; Pages the pages read; Truncated when the page limit
	// ran out first.
	Listed    int  `json:"listed"`
	Pages     int  `json:"pages"`
	Truncated bool `json:"truncated,omitempty"`
	// Failed counts the workflow_job events none of whose attempts succeeded.
	Failed int `json:"failed"`
	// AlreadyRedelivered, Deferred, Probe and ProbeBy are PlanRedeliveries' (RedeliveryPlan);
	// ProbeGUID names the succeeded event a ProbeSucceededDelivery redelivered, ProbeError why
	// GitHub did not take the probe (the next run probes again).
	AlreadyRedelivered int       `json:"alreadyRedelivered"`
	Deferred           int       `json:"deferred"`
	Probe              bool      `json:"probe,omitempty"`
	ProbeBy            ProbeKind `json:"probeBy,omitempty"`
	ProbeGUID          string    `json:"probeGuid,omitempty"`
	ProbeError         string    `json:"probeError,omitempty"`
	// Redeliveries are the events redelivered, or in a dry run those that would be; those
	// GitHub refused carry the error. Redelivered counts those GitHub accepted.
	Redeliveries []Redelivery `json:"redeliveries,omitempty"`
	Redelivered  int          `json:"redelivered"`
	// Error is the listing's failure: nothing was redelivered.
	Error string `json:"error,omitempty"`
	// Remembered are the guids redelivered within the window, this run's included: the next
	// scheduled run's memory.
	Remembered []RememberedDelivery `json:"remembered,omitempty"`
}
