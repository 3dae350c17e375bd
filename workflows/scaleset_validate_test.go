package workflows

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestScaleSetSpecDefaultsToThePoolsName(t *testing.T) {
	spec := poolTestSpec()
	spec.ScaleSet = &ScaleSetSpec{}
	if got := spec.WithDefaults().ScaleSet.Name; got != "linux" {
		t.Errorf("set name = %q, want the pool's name", got)
	}
	spec.ScaleSet = &ScaleSetSpec{Name: "linux-set"}
	if got := spec.WithDefaults().ScaleSet.Name; got != "linux-set" {
		t.Errorf("set name = %q, want linux-set", got)
	}
	if poolTestSpec().IsScaleSet() || !spec.IsScaleSet() {
		t.Error("IsScaleSet does not follow the section")
	}
}

// TestScaleSetSpecValidation: every problem of a scaleSet section is named at its field path,
// and a valid section is accepted.
func TestScaleSetSpecValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*PoolSpec)
		want   []string // field paths
	}{
		{"valid section", func(*PoolSpec) {}, nil},
		{"name with a space", func(s *PoolSpec) { s.ScaleSet.Name = "linux set" }, []string{"pool.scaleSet.name"}},
		{"name with a comma", func(s *PoolSpec) { s.ScaleSet.Name = "a,b" }, []string{"pool.scaleSet.name"}},
		{"name too long", func(s *PoolSpec) { s.ScaleSet.Name = strings.Repeat("a", maxLabelLength+1) }, []string{"pool.scaleSet.name"}},
		{"with pull", func(s *PoolSpec) { s.Pull = &PullSpec{Metric: PullMetricBusyPercentage} }, []string{"pool.pull"}},
		{"persistent runners", func(s *PoolSpec) { s.Ephemeral = ptr(false) }, []string{"pool.ephemeral"}},
		{"warm registrations", func(s *PoolSpec) { s.WarmRegistrations = 2 }, []string{"pool.warmRegistrations"}},
		{"clusters", func(s *PoolSpec) { s.Clusters = []string{"east"} }, []string{"pool.clusters"}},
		{"repository with a runner group", func(s *PoolSpec) {
			s.Organization, s.Repository, s.RunnerGroup = "", "acme/app", "big"
		}, []string{"pool.runnerGroup"}},
		{"max below min", func(s *PoolSpec) { s.MaxReplicas = ptr(0) }, []string{"pool.maxReplicas"}},
		{"no labels", func(s *PoolSpec) { s.Labels = nil }, []string{"pool.labels"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := poolTestSpec()
			spec.ScaleSet = &ScaleSetSpec{}
			spec = spec.WithDefaults()
			tc.modify(&spec)
			var got []string
			for _, e := range spec.ValidateNew(field.NewPath("pool")) {
				got = append(got, e.Field)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("errors at %v, want %v", got, want)
			}
		})
	}
}

func TestPoolWithoutScaleSetMeetsNoScaleSetRule(t *testing.T) {
	if errs := poolTestSpec().ValidateNew(field.NewPath("pool")); len(errs) > 0 {
		t.Errorf("a pool without scaleSet: %v", errs)
	}
}
