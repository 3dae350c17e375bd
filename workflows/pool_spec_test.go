package workflows

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func poolTestSpec() PoolSpec {
	return PoolSpec{
		Name:         "linux",
		Organization: "acme",
		Labels:       []string{"linux", "x64"},
		MinReplicas:  1,
		MaxReplicas:  ptr(5),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "runner", Image: "runner:1"},
		}}},
	}.WithDefaults()
}

func TestTemplateHashTracksWhatForcesANewRunner(t *testing.T) {
	base := poolTestSpec()
	h := base.TemplateHash()
	if h != poolTestSpec().TemplateHash() {
		t.Fatal("hash of equal specs differs")
	}
	same := []func(*PoolSpec){
		func(s *PoolSpec) { s.MinReplicas, s.MaxReplicas, s.MinIdle = 0, ptr(9), 3 },
		func(s *PoolSpec) { s.ScaleDownDelay = &metav1.Duration{Duration: time.Second} },
		func(s *PoolSpec) { s.Labels = []string{"x64", "linux"} },
	}
	for i, change := range same {
		s := poolTestSpec()
		change(&s)
		if s.TemplateHash() != h {
			t.Errorf("change %d must not force new runners but changed the hash", i)
		}
	}
	different := []func(*PoolSpec){
		func(s *PoolSpec) { s.Template.Spec.Containers[0].Image = "runner:2" },
		func(s *PoolSpec) { s.Labels = append(s.Labels, "gpu") },
		func(s *PoolSpec) { s.RunnerGroup = "ci" },
		func(s *PoolSpec) { s.Ephemeral = ptr(false) },
		func(s *PoolSpec) { s.Organization, s.Repository = "", "acme/app" },
		func(s *PoolSpec) { s.Namespace = "ci" },
		func(s *PoolSpec) { s.WorkFolder = "/work" },
		func(s *PoolSpec) {
			s.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "cache"}}}
		},
	}
	for i, change := range different {
		s := poolTestSpec()
		change(&s)
		if s.TemplateHash() == h {
			t.Errorf("change %d forces new runners but kept the hash", i)
		}
	}
}

func TestValidSpecHasNoErrors(t *testing.T) {
	if errs := poolTestSpec().Validate(field.NewPath("pool")); len(errs) > 0 {
		t.Fatalf("valid spec rejected: %v", errs)
	}
}

func rfc3339(s string) metav1.Time {
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return metav1.NewTime(tm)
}

func TestScheduledOverrides(t *testing.T) {
	once := ScheduledOverride{StartTime: rfc3339("2024-03-01T09:00:00Z"), EndTime: rfc3339("2024-03-01T17:00:00Z"), MinReplicas: ptr(4)}
	weekly := ScheduledOverride{
		StartTime: rfc3339("2024-03-04T08:00:00Z"), EndTime: rfc3339("2024-03-04T18:00:00Z"), MinReplicas: ptr(3),
		RecurrenceRule: &RecurrenceRule{Frequency: FrequencyWeekly, UntilTime: ptr(rfc3339("2024-04-01T00:00:00Z"))},
	}
	monthly := ScheduledOverride{
		StartTime: rfc3339("2024-01-31T00:00:00Z"), EndTime: rfc3339("2024-02-01T00:00:00Z"), MaxReplicas: ptr(0),
		RecurrenceRule: &RecurrenceRule{Frequency: FrequencyMonthly},
	}
	cases := []struct {
		name       string
		overrides  []ScheduledOverride
		now        string
		wantActive int
		wantNext   string
	}{
		{"before a one-off window", []ScheduledOverride{once}, "2024-03-01T08:00:00Z", -1, "2024-03-01T09:00:00Z"},
		{"at the start of a one-off window", []ScheduledOverride{once}, "2024-03-01T09:00:00Z", 0, "2024-03-01T17:00:00Z"},
		{"end is exclusive", []ScheduledOverride{once}, "2024-03-01T17:00:00Z", -1, ""},
		{"weekly, second week, inside", []ScheduledOverride{weekly}, "2024-03-11T12:00:00Z", 0, "2024-03-11T18:00:00Z"},
		{"weekly, between windows", []ScheduledOverride{weekly}, "2024-03-12T12:00:00Z", -1, "2024-03-18T08:00:00Z"},
		{"weekly, after until", []ScheduledOverride{weekly}, "2024-04-01T12:00:00Z", -1, ""},
		{"monthly from the 31st (Go date normalisation)", []ScheduledOverride{monthly}, "2024-03-02T12:00:00Z", 0, "2024-03-03T00:00:00Z"},
		{"monthly, years later", []ScheduledOverride{monthly}, "2030-05-15T00:00:00Z", -1, "2030-05-31T00:00:00Z"},
		{"first active wins, next is the earliest change", []ScheduledOverride{weekly, once}, "2024-03-04T10:00:00Z", 0, "2024-03-04T18:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			active, next := activeOverride(tc.overrides, rfc3339(tc.now).Time)
			if active != tc.wantActive {
				t.Errorf("active = %d, want %d", active, tc.wantActive)
			}
			want := time.Time{}
			if tc.wantNext != "" {
				want = rfc3339(tc.wantNext).UTC()
			}
			if !next.Equal(want) {
				t.Errorf("next = %v, want %v", next, want)
			}
		})
	}
}

func TestEffectiveBoundsLayering(t *testing.T) {
	s := poolTestSpec()
	s.ScheduledOverrides = []ScheduledOverride{{StartTime: rfc3339("2024-03-01T09:00:00Z"), EndTime: rfc3339("2024-03-01T17:00:00Z"), MinReplicas: ptr(4)}}
	inside := rfc3339("2024-03-01T10:00:00Z").Time
	b, on, _ := effectiveBounds(s, ScaleRequest{}, inside)
	if !on || b.Min != 4 || b.Max != 5 {
		t.Errorf("override: got %+v on=%v", b, on)
	}
	b, _, _ = effectiveBounds(s, ScaleRequest{Max: ptr(2)}, inside)
	if b.Min != 2 || b.Max != 2 {
		t.Errorf("operator max below override min must cap min: got %+v", b)
	}
	b, on, _ = effectiveBounds(s, ScaleRequest{Min: ptr(0)}, rfc3339("2024-03-02T10:00:00Z").Time)
	if on || b.Min != 0 || b.Max != 5 {
		t.Errorf("operator min outside override: got %+v on=%v", b, on)
	}
}
