package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestPrewarmSpecValidation: every problem of a prewarm section is named at its field path
// with its reason, a valid section is accepted, and a section switched off is not held to
// what only prewarming needs.
func TestPrewarmSpecValidation(t *testing.T) {
	grace := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	for _, tc := range []struct {
		name    string
		prewarm PrewarmSpec
		modify  func(*PoolSpec)
		want    []string // field paths
		words   string   // in the first error's detail
	}{
		{"on, default grace", PrewarmSpec{Enabled: true}, nil, nil, ""},
		{"on, grace set", PrewarmSpec{Enabled: true, Grace: grace(5 * time.Minute)}, nil, nil, ""},
		{"grace zero", PrewarmSpec{Enabled: true, Grace: grace(0)}, nil, []string{"pool.prewarm.grace"}, "must be > 0"},
		{"grace too long", PrewarmSpec{Enabled: true, Grace: grace(MaxPrewarmGrace + time.Second)}, nil, []string{"pool.prewarm.grace"}, "<= 30m0s"},
		{"off with a bad grace", PrewarmSpec{Grace: grace(-time.Second)}, nil, []string{"pool.prewarm.grace"}, "must be > 0"},
		{"persistent runners", PrewarmSpec{Enabled: true}, func(s *PoolSpec) { s.Ephemeral = ptr(false) },
			[]string{"pool.prewarm.enabled"}, "only ephemeral pools prewarm"},
		{"persistent runners, off", PrewarmSpec{}, func(s *PoolSpec) { s.Ephemeral = ptr(false) }, nil, ""},
		{"pull", PrewarmSpec{Enabled: true}, func(s *PoolSpec) {
			s.Pull = &PullSpec{Metric: PullMetricBusyPercentage}
		}, []string{"pool.prewarm.enabled"}, "pull pool"},
		{"scale set", PrewarmSpec{Enabled: true}, func(s *PoolSpec) { s.ScaleSet = &ScaleSetSpec{Name: "set"} },
			[]string{"pool.prewarm.enabled"}, "scale-set pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := poolTestSpec()
			spec.Prewarm = &tc.prewarm
			if tc.modify != nil {
				tc.modify(&spec)
			}
			var got []string
			errs := spec.ValidateNew(field.NewPath("pool"))
			for _, e := range errs {
				got = append(got, e.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("errors %v at %v, want at %v", errs, got, tc.want)
			}
			if tc.words != "" && !strings.Contains(errs[0].Error(), tc.words) {
				t.Errorf("error %q does not say %q", errs[0].Error(), tc.words)
			}
		})
	}
}

// TestPrewarmIsOffByDefault: a pool without the section, or with it switched off, predicts
// nothing, and its grace falls back to the policy's.
func TestPrewarmIsOffByDefault(t *testing.T) {
	spec := poolTestSpec()
	if spec.Prewarm != nil || spec.PrewarmOn() || spec.PrewarmGraceOrDefault() != DefaultPrewarmGrace {
		t.Errorf("default spec: prewarm %+v on=%v grace %s", spec.Prewarm, spec.PrewarmOn(), spec.PrewarmGraceOrDefault())
	}
	spec.Prewarm = &PrewarmSpec{Grace: &metav1.Duration{Duration: time.Minute}}
	if spec.PrewarmOn() || spec.PrewarmGraceOrDefault() != time.Minute {
		t.Errorf("section off: on=%v grace %s, want off and its own grace", spec.PrewarmOn(), spec.PrewarmGraceOrDefault())
	}
}
