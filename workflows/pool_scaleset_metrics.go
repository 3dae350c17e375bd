package workflows

import (
	"go.temporal.io/sdk/client"
)

// recordScaleSetMetrics publishes a scale-set pool's hold on its set: whether its listener
// runs, the last message (id and time, so an alert can see a listener that stopped hearing),
// what GitHub's statistics in it said, and the jobs the pool's ledger holds. Labels are the
// pool and fixed states only (never a set or session id). Recording issues no command.
func (p *poolRun) recordScaleSetMetrics(m client.MetricsHandler) {
	st := p.st.ScaleSet
	if st == nil {
		return
	}
	m.Gauge("runnerflow_scaleset_listening").Update(boolGauge(st.Listening))
	m.Gauge("runnerflow_scaleset_last_message_id").Update(float64(st.Ledger.LastMessageID))
	at := 0.0
	if !st.MessageAt.IsZero() {
		at = float64(st.MessageAt.UnixMilli()) / 1000
	}
	m.Gauge("runnerflow_scaleset_last_message_timestamp_seconds").Update(at)
	m.Gauge("runnerflow_scaleset_recreated").Update(float64(st.Recreated))
	s := st.Statistics
	byState(m, "runnerflow_scaleset_github_jobs", []stateValue{
		{"available", s.AvailableJobs}, {"acquired", s.AcquiredJobs}, {"assigned", s.AssignedJobs}, {"running", s.RunningJobs}})
	byState(m, "runnerflow_scaleset_github_runners", []stateValue{
		{"registered", s.RegisteredRunners}, {"busy", s.BusyRunners}, {"idle", s.IdleRunners}})
	byState(m, "runnerflow_scaleset_jobs", []stateValue{{"waiting", len(st.Ledger.Waiting)}, {"running", len(st.Ledger.Running)}})
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// stateValue is one state's value of a gauge by state (a slice, not a map: a fixed order).
type stateValue struct {
	state string
	value int
}

func byState(m client.MetricsHandler, name string, values []stateValue) {
	for _, v := range values {
		m.WithTags(map[string]string{"state": v.state}).Gauge(name).Update(float64(v.value))
	}
}
