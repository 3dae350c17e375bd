package workflows

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// gaugeRecorder is a MetricsHandler that keeps each gauge's last value by name and tags.
type gaugeRecorder struct {
	tags   map[string]string
	gauges map[string]float64
}

func (g gaugeRecorder) WithTags(t map[string]string) client.MetricsHandler {
	all := maps.Clone(g.tags)
	maps.Copy(all, t)
	return gaugeRecorder{tags: all, gauges: g.gauges}
}
func (g gaugeRecorder) Counter(string) client.MetricsCounter {
	return client.MetricsNopHandler.Counter("")
}
func (g gaugeRecorder) Timer(string) client.MetricsTimer { return client.MetricsNopHandler.Timer("") }
func (g gaugeRecorder) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) { g.gauges[seriesKey(name, g.tags)] = v })
}

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

func seriesKey(name string, tags map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		kv = append(kv, k+"="+tags[k])
	}
	return name + "{" + strings.Join(kv, ",") + "}"
}

func TestScaleSetGaugesFollowThePoolsHoldOnItsSet(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		set  *PoolScaleSetState
		want map[string]float64
	}{
		{"a pool of no scale set records none", nil, map[string]float64{}},
		{"a listened set with its last message", &PoolScaleSetState{
			ScaleSetID: 7, Listening: true, MessageAt: at, Recreated: 1,
			Ledger:     ScaleSetLedger{LastMessageID: 42, Waiting: []int64{1, 2}, Running: []ScaleSetRunningJob{{}}},
			Statistics: ScaleSetStatistics{AvailableJobs: 3, AssignedJobs: 2, RunningJobs: 1, RegisteredRunners: 2, BusyRunners: 1, IdleRunners: 1},
		}, map[string]float64{
			"runnerflow_scaleset_listening{pool=p}": 1, "runnerflow_scaleset_last_message_id{pool=p}": 42,
			"runnerflow_scaleset_last_message_timestamp_seconds{pool=p}": float64(at.Unix()), "runnerflow_scaleset_recreated{pool=p}": 1,
			"runnerflow_scaleset_github_jobs{pool=p,state=available}": 3, "runnerflow_scaleset_github_jobs{pool=p,state=acquired}": 0,
			"runnerflow_scaleset_github_jobs{pool=p,state=assigned}": 2, "runnerflow_scaleset_github_jobs{pool=p,state=running}": 1,
			"runnerflow_scaleset_github_runners{pool=p,state=registered}": 2, "runnerflow_scaleset_github_runners{pool=p,state=busy}": 1,
			"runnerflow_scaleset_github_runners{pool=p,state=idle}": 1,
			"runnerflow_scaleset_jobs{pool=p,state=waiting}":        2, "runnerflow_scaleset_jobs{pool=p,state=running}": 1,
		}},
		{"a set not listened to, no message yet", &PoolScaleSetState{ScaleSetID: 7}, map[string]float64{
			"runnerflow_scaleset_listening{pool=p}": 0, "runnerflow_scaleset_last_message_id{pool=p}": 0,
			"runnerflow_scaleset_last_message_timestamp_seconds{pool=p}": 0, "runnerflow_scaleset_recreated{pool=p}": 0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := gaugeRecorder{tags: map[string]string{"pool": "p"}, gauges: map[string]float64{}}
			p := &poolRun{st: PoolState{ScaleSet: tt.set}}
			p.recordScaleSetMetrics(rec)
			for k, v := range tt.want {
				if got, ok := rec.gauges[k]; !ok || got != v {
					t.Errorf("%s = %v (recorded %v), want %v", k, got, ok, v)
				}
			}
			for k := range rec.gauges {
				if !strings.Contains(k, "pool=p") || strings.Contains(k, "7") {
					t.Errorf("series %s: want the pool's label and no set id", k)
				}
			}
			if tt.set == nil && len(rec.gauges) != 0 {
				t.Errorf("recorded %v for a pool of no scale set", rec.gauges)
			}
		})
	}
}
