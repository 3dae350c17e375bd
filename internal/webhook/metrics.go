package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnerflow/runnerflow/internal/metrics"
)

// Outcomes of one webhook delivery, the bounded values of the outcome label.
const (
	OutcomeAccepted     = "accepted"      // handed to Temporal (reservation, release, runner signal)
	OutcomePong         = "pong"          // ping answered
	OutcomeIgnored      = "ignored"       // an event or action scaling does not use
	OutcomeUnrouted     = "unrouted"      // a workflow_job no pool fits
	OutcomeBadSignature = "bad_signature" // 401
	OutcomeMalformed    = "malformed"     // 400
	OutcomeUnsupported  = "unsupported"   // 415, a content type GitHub does not send
	OutcomeTooLarge     = "too_large"     // 413
	OutcomeUnavailable  = "unavailable"   // 503, Temporal unreachable or too slow
	OutcomeFailed       = "failed"        // 500, Temporal refused for another reason
)

// Metrics are the starter's webhook series. Labels are bounded: event is ping, workflow_job or
// other; outcome is one of the Outcome constants; signal and result are fixed sets.
type Metrics struct {
	events        *prometheus.CounterVec
	ack           prometheus.Histogram
	runnerSignals *prometheus.CounterVec
	jobStart      *prometheus.HistogramVec
	windowSignals *prometheus.HistogramVec
	unmatched     *prometheus.CounterVec
}

// NewMetrics creates the webhook series and registers them with reg (the one registry /metrics
// serves); a nil reg leaves them unregistered, for tests.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnerflow_webhook_events_total",
			Help: "GitHub webhook deliveries received, by event type and outcome.",
		}, []string{"event", "outcome"}),
		ack: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "runnerflow_webhook_ack_duration_seconds",
			Help:    "Time from receiving a webhook delivery to answering it (GitHub allows 10 s).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		runnerSignals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnerflow_webhook_runner_signals_total",
			Help: "Job started/completed notices forwarded to runner workflows, by signal and result.",
		}, []string{"signal", "result"}),
		jobStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runnerflow_job_start_seconds",
			Help:    "From a job being queued to it running on a runnerflow runner (GitHub's started_at - created_at), by pool.",
			Buckets: metrics.DurationBuckets,
		}, []string{"pool"}),
		windowSignals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "runnerflow_webhook_window_signal_events",
			Help: "workflow_job events carried by each signal to a scale window (deliveries that arrive while a signal is in flight share the next), by result.",
			// Up to workflows.WorkflowJobsSignalMaxEvents.
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}, []string{"result"}),
		unmatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runnerflow_webhook_unmatched_jobs_total",
			Help: "Queued jobs no pool fits that ask for a self-hosted runner or name a pool's label, recorded for `starter why`, by result.",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.ack, m.runnerSignals, m.jobStart, m.windowSignals, m.unmatched)
	}
	return m
}

// observeJobStart records one job's wait from queued to started; GitHub's timestamps have
// whole seconds. A notice without both times, or with started before queued, says nothing.
func (m *Metrics) observeJobStart(pool string, queued, started time.Time) {
	if queued.IsZero() || started.IsZero() || started.Before(queued) {
		return
	}
	m.jobStart.WithLabelValues(pool).Observe(started.Sub(queued).Seconds())
}

// observeWindowSignal records one signal to a scale window: how many events it carried and
// whether Temporal accepted it. Its count is the number of window signals (Temporal actions).
func (m *Metrics) observeWindowSignal(events int, err error) {
	result := "sent"
	if err != nil {
		result = "error"
	}
	m.windowSignals.WithLabelValues(result).Observe(float64(events))
}

// observeUnmatched counts one unmatched job handed to the unmatched-jobs workflow.
func (m *Metrics) observeUnmatched(err error) {
	result := "recorded"
	if err != nil {
		result = "error"
	}
	m.unmatched.WithLabelValues(result).Inc()
}

// Unmatched returns the counter of unmatched jobs with the given result, for tests.
func (m *Metrics) Unmatched(result string) prometheus.Counter {
	return m.unmatched.WithLabelValues(result)
}

// eventLabel keeps the event label bounded whatever the X-GitHub-Event header says.
func eventLabel(event string) string {
	switch event {
	case "ping", "workflow_job":
		return event
	}
	return "other"
}

// Events returns the counter of deliveries with the given event type and outcome, for tests
// and the demo's summary.
func (m *Metrics) Events(event, outcome string) prometheus.Counter {
	return m.events.WithLabelValues(eventLabel(event), outcome)
}
