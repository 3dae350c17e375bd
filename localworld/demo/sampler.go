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
// very values the histograms were given, with true percentiles and maxima.
type sampler struct {
	next    client.MetricsHandler
	mu      *sync.Mutex
	samples map[string][]time.Duration
}

func newSampler(next client.MetricsHandler) *sampler {
	return &sampler{next: next, mu: &sync.Mutex{}, samples: map[string][]time.Duration{}}
}

// WithTags implements client.MetricsHandler.
func (s *sampler) WithTags(tags map[string]string) client.MetricsHandler {
	return &sampler{next: s.next.WithTags(tags), mu: s.mu, samples: s.samples}
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
	t.s.samples[t.name] = append(t.s.samples[t.name], d)
}

// Samples returns a copy of every sample of one timer.
func (s *sampler) Samples(name string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples[name])
}
