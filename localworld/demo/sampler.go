package demo

import (
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// sampler is the Temporal metrics handler the demo's worker reports through: everything goes
// on to the registry's handler, and runnerflow's own timers (the scale-up latencies the
// runner workflows record) are also kept as exact samples, so the demo's summary shows the
// very values the histograms were given, with true percentiles and maxima. Samples are kept by
// the pool they were tagged with, so the burst's figures leave out the pipeline's.
type sampler struct {
	next    client.MetricsHandler
	mu      *sync.Mutex
	samples map[string][]sample
	pool    string
}

// sample is one recorded duration and the pool it was tagged with.
type sample struct {
	pool string
	d    time.Duration
}

func newSampler(next client.MetricsHandler) *sampler {
	return &sampler{next: next, mu: &sync.Mutex{}, samples: map[string][]sample{}}
}

// WithTags implements client.MetricsHandler.
func (s *sampler) WithTags(tags map[string]string) client.MetricsHandler {
	pool := s.pool
	if p, ok := tags["pool"]; ok {
		pool = p
	}
	return &sampler{next: s.next.WithTags(tags), mu: s.mu, samples: s.samples, pool: pool}
}

// Counter implements client.MetricsHandler.
func (s *sampler) Counter(name string) client.MetricsCounter { return s.next.Counter(name) }

// Gauge implements client.MetricsHandler.
func (s *sampler) Gauge(name string) client.MetricsGauge { return s.next.Gauge(name) }

// Timer implements client.MetricsHandler.
func (s *sampler) Timer(name string) client.MetricsTimer {
	t := s.next.Timer(name)
	if !strings.HasPrefix(name, "runnerflow_") {
		return t
	}
	return sampledTimer{next: t, name: name, s: s}
}

type sampledTimer struct {
	next client.MetricsTimer
	name string
	s    *sampler
}

func (t sampledTimer) Record(d time.Duration) {
	t.next.Record(d)
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.samples[t.name] = append(t.s.samples[t.name], sample{pool: t.s.pool, d: d})
}

// Samples returns every sample of one timer tagged with one of the pools.
func (s *sampler) Samples(name string, pools ...string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, smp := range s.samples[name] {
		if slices.Contains(pools, smp.pool) {
			out = append(out, smp.d)
		}
	}
	return out
}
