package workflows

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// GitHub's naming rules: logins are alphanumerics and single hyphens (at most 39 characters),
// repository names alphanumerics, '.', '_' and '-' (at most 100), enterprise slugs lower-case.
var (
	githubLogin    = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)
	githubRepoName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	enterpriseSlug = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$`)
)

// maxLabelLength bounds a runner label as GitHub does.
const maxLabelLength = 256

// ValidateNew is Validate plus the rules added while pools were already running: what `starter
// apply`, the apply update's validator and a new pool's start (behind changeNewSpecRules)
// check. Validate alone is what a running pool's history replays (a pool's first run
// validates its spec), so a pool started with a spec a newer rule rejects still replays; it
// meets the rule at its next apply.
func (s PoolSpec) ValidateNew(path *field.Path) field.ErrorList {
	errs := s.Validate(path)
	errs = append(errs, s.validateClusters(path)...)
	errs = append(errs, s.validateScaleSet(path)...)
	errs = append(errs, s.validatePrewarm(path)...)
	if s.Repository != "" && s.RunnerGroup != "" {
		errs = append(errs, field.Invalid(path.Child("runnerGroup"), s.RunnerGroup,
			"runner groups exist only for organizations and enterprises; remove runnerGroup from a repository-scoped pool"))
	}
	return errs
}

// Validate checks a spec (after WithDefaults) and returns every problem with its field path
// under path, e.g. "pools[1].maxReplicas: Invalid value: 1: must be >= minReplicas (2)".
func (s PoolSpec) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validatePoolName(s.Name, path.Child("name"))...)
	errs = append(errs, s.validateScope(path)...)
	errs = append(errs, validateLabels(s.Labels, path.Child("labels"))...)
	if strings.TrimSpace(s.RunnerGroup) != s.RunnerGroup {
		errs = append(errs, field.Invalid(path.Child("runnerGroup"), s.RunnerGroup, "must not start or end with spaces"))
	}
	errs = append(errs, s.validateReplicas(path)...)
	errs = append(errs, s.validateWarm(path.Child("warmRegistrations"))...)
	errs = append(errs, s.validateDurations(path)...)
	for _, msg := range validation.IsDNS1123Label(s.Namespace) {
		errs = append(errs, field.Invalid(path.Child("namespace"), s.Namespace, msg))
	}
	if strings.ContainsAny(s.WorkFolder, "\n\r\x00") {
		errs = append(errs, field.Invalid(path.Child("workFolder"), s.WorkFolder, "must be a single-line path"))
	}
	errs = append(errs, validateTemplate(s.Template, s.claimNames(), path.Child("template"))...)
	errs = append(errs, s.validateClaims(path.Child("volumeClaimTemplates"))...)
	for i, o := range s.ScheduledOverrides {
		errs = append(errs, o.validate(path.Child("scheduledOverrides").Index(i))...)
	}
	errs = append(errs, s.validatePull(path.Child("pull"))...)
	return errs
}

func validatePoolName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "a pool needs a name")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(name) > MaxPoolNameLength {
		errs = append(errs, field.TooLong(path, name, MaxPoolNameLength))
	}
	return errs
}

func (s PoolSpec) validateScope(path *field.Path) field.ErrorList {
	set := []string{}
	for _, f := range []struct{ name, value string }{
		{"repository", s.Repository}, {"organization", s.Organization}, {"enterprise", s.Enterprise},
	} {
		if f.value != "" {
			set = append(set, f.name)
		}
	}
	switch {
	case len(set) == 0:
		return field.ErrorList{field.Required(path.Child("repository"), "exactly one of repository, organization or enterprise must be set")}
	case len(set) > 1:
		return field.ErrorList{field.Forbidden(path.Child(set[1]), fmt.Sprintf("exactly one of repository, organization or enterprise may be set (%s is set too)", set[0]))}
	}
	switch {
	case s.Repository != "":
		owner, repo, ok := strings.Cut(s.Repository, "/")
		if !ok || !githubLogin.MatchString(owner) || !githubRepoName.MatchString(repo) || repo == "." || repo == ".." {
			return field.ErrorList{field.Invalid(path.Child("repository"), s.Repository, `must be "owner/repo"`)}
		}
	case s.Organization != "":
		if !githubLogin.MatchString(s.Organization) {
			return field.ErrorList{field.Invalid(path.Child("organization"), s.Organization, "must be a GitHub organization login")}
		}
	default:
		if !enterpriseSlug.MatchString(s.Enterprise) {
			return field.ErrorList{field.Invalid(path.Child("enterprise"), s.Enterprise, "must be an enterprise slug (lower-case letters, digits and '-')")}
		}
	}
	return nil
}

func validateLabels(labels []string, path *field.Path) field.ErrorList {
	if len(labels) == 0 {
		return field.ErrorList{field.Required(path, "a pool needs at least one label for jobs to select it")}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, l := range labels {
		p := path.Index(i)
		switch {
		case l == "":
			errs = append(errs, field.Required(p, "labels must not be empty"))
		case len(l) > maxLabelLength:
			errs = append(errs, field.TooLong(p, l, maxLabelLength))
		case strings.ContainsAny(l, ", \t\r\n"):
			errs = append(errs, field.Invalid(p, l, "must not contain commas or whitespace"))
		case seen.Has(strings.ToLower(l)):
			errs = append(errs, field.Duplicate(p, l))
		}
		seen.Insert(strings.ToLower(l))
	}
	return errs
}

func (s PoolSpec) validateReplicas(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MinReplicas < 0 {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), s.MinReplicas, "must be >= 0"))
	}
	if s.MinIdle < 0 {
		errs = append(errs, field.Invalid(path.Child("minIdle"), s.MinIdle, "must be >= 0"))
	}
	if s.MaxReplicas == nil {
		return append(errs, field.Required(path.Child("maxReplicas"), "a pool needs a maximum"))
	}
	maxR := *s.MaxReplicas
	switch {
	case maxR < 0:
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), maxR, "must be >= 0"))
	case maxR > MaxPoolReplicas:
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), maxR, fmt.Sprintf("must be <= %d", MaxPoolReplicas)))
	case maxR < s.MinReplicas:
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), maxR, fmt.Sprintf("must be >= minReplicas (%d)", s.MinReplicas)))
	}
	if s.MinIdle > maxR {
		errs = append(errs, field.Invalid(path.Child("minIdle"), s.MinIdle, fmt.Sprintf("must be <= maxReplicas (%d)", maxR)))
	}
	return errs
}

// validateWarm: warm registrations are JIT registrations, which exist for ephemeral runners
// only, and a pool never needs more of them than runners.
func (s PoolSpec) validateWarm(path *field.Path) field.ErrorList {
	n := s.WarmRegistrations
	switch {
	case n < 0:
		return field.ErrorList{field.Invalid(path, n, "must be >= 0")}
	case n == 0:
		return nil
	case !s.IsEphemeral():
		return field.ErrorList{field.Forbidden(path, "only ephemeral pools keep warm registrations (persistent runners register with a token)")}
	case s.MaxReplicas != nil && n > *s.MaxReplicas:
		return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be <= maxReplicas (%d)", *s.MaxReplicas))}
	}
	return nil
}

func (s PoolSpec) validateDurations(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := s.ScaleDownDelay; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("scaleDownDelay"), d.Duration.String(), "must be >= 0"))
	}
	if d := s.ReservationDuration; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("reservationDuration"), d.Duration.String(), "must be > 0"))
	}
	if d := s.RegistrationTimeout; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("registrationTimeout"), d.Duration.String(), "must be > 0"))
	}
	return errs
}

func (s PoolSpec) claimNames() sets.Set[string] {
	names := sets.New[string]()
	for _, c := range s.VolumeClaimTemplates {
		names.Insert(c.Name)
	}
	return names
}

// reservedPodLabels are set by runnerflow on every runner pod; a template must not claim them.
var reservedPodLabels = []string{runnerpod.LabelManagedBy, runnerpod.LabelPool, runnerpod.LabelRunner}

// reservedRunnerEnv is injected by runnerflow; a template that set it would leak or clash.
var reservedRunnerEnv = []string{runnerpod.EnvJITConfig, runnerpod.EnvRegistrationToken}

func validateTemplate(t corev1.PodTemplateSpec, claims sets.Set[string], path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, path.Child("metadata", "labels"))
	for _, l := range reservedPodLabels {
		if _, ok := t.Labels[l]; ok {
			errs = append(errs, field.Forbidden(path.Child("metadata", "labels").Key(l), "is set by runnerflow"))
		}
	}
	spec := path.Child("spec")
	if p := t.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyNever}))
	}
	volumes := sets.New[string]()
	for i, v := range t.Spec.Volumes {
		p := spec.Child("volumes").Index(i).Child("name")
		errs = append(errs, dnsLabel(v.Name, p)...)
		switch {
		case volumes.Has(v.Name):
			errs = append(errs, field.Duplicate(p, v.Name))
		case claims.Has(v.Name):
			errs = append(errs, field.Invalid(p, v.Name, "is also a volumeClaimTemplates name; the slot's claim provides this volume"))
		}
		volumes.Insert(v.Name)
	}
	mountable := volumes.Union(claims)
	errs = append(errs, validateContainers(t.Spec, mountable, spec)...)
	return errs
}

func validateContainers(spec corev1.PodSpec, mountable sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		return field.ErrorList{field.Required(path.Child("containers"), fmt.Sprintf("a container named %q is required", runnerpod.RunnerContainerName))}
	}
	names := sets.New[string]()
	hasRunner := false
	check := func(c corev1.Container, p *field.Path) {
		errs = append(errs, dnsLabel(c.Name, p.Child("name"))...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		if c.Image == "" {
			errs = append(errs, field.Required(p.Child("image"), ""))
		}
		for j, m := range c.VolumeMounts {
			if !mountable.Has(m.Name) {
				errs = append(errs, field.NotFound(p.Child("volumeMounts").Index(j).Child("name"), m.Name))
			}
		}
	}
	for i, c := range spec.InitContainers {
		check(c, path.Child("initContainers").Index(i))
	}
	for i, c := range spec.Containers {
		p := path.Child("containers").Index(i)
		check(c, p)
		if c.Name != runnerpod.RunnerContainerName {
			continue
		}
		hasRunner = true
		for j, e := range c.Env {
			for _, reserved := range reservedRunnerEnv {
				if e.Name == reserved {
					errs = append(errs, field.Forbidden(p.Child("env").Index(j).Child("name"), "is set by runnerflow from the runner's secret"))
				}
			}
		}
	}
	if !hasRunner {
		errs = append(errs, field.Required(path.Child("containers"), fmt.Sprintf("a container named %q is required", runnerpod.RunnerContainerName)))
	}
	return errs
}

func (s PoolSpec) validateClaims(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range s.VolumeClaimTemplates {
		p := path.Index(i)
		errs = append(errs, dnsLabel(c.Name, p.Child("metadata", "name"))...)
		if seen.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("metadata", "name"), c.Name))
		}
		seen.Insert(c.Name)
		if len(c.Spec.AccessModes) == 0 {
			errs = append(errs, field.Required(p.Child("spec", "accessModes"), ""))
		}
		if _, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			errs = append(errs, field.Required(p.Child("spec", "resources", "requests", "storage"), ""))
		}
		if !s.mounts(c.Name) {
			errs = append(errs, field.Invalid(p.Child("metadata", "name"), c.Name, "is not mounted by any container (template.spec.containers[].volumeMounts)"))
		}
	}
	return errs
}

func (s PoolSpec) mounts(volume string) bool {
	for _, c := range slices.Concat(s.Template.Spec.InitContainers, s.Template.Spec.Containers) {
		for _, m := range c.VolumeMounts {
			if m.Name == volume {
				return true
			}
		}
	}
	return false
}

func dnsLabel(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

var frequencies = []string{FrequencyDaily, FrequencyWeekly, FrequencyMonthly, FrequencyYearly}

func (o ScheduledOverride) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o.StartTime.IsZero() {
		errs = append(errs, field.Required(path.Child("startTime"), "an RFC 3339 time"))
	}
	if o.EndTime.IsZero() {
		errs = append(errs, field.Required(path.Child("endTime"), "an RFC 3339 time"))
	} else if !o.EndTime.After(o.StartTime.Time) {
		errs = append(errs, field.Invalid(path.Child("endTime"), o.EndTime.UTC().Format("2006-01-02T15:04:05Z07:00"), "must be after startTime"))
	}
	if o.MinReplicas == nil && o.MaxReplicas == nil {
		errs = append(errs, field.Required(path.Child("minReplicas"), "an override sets minReplicas, maxReplicas or both"))
	}
	if o.MinReplicas != nil && *o.MinReplicas < 0 {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), *o.MinReplicas, "must be >= 0"))
	}
	if o.MaxReplicas != nil && (*o.MaxReplicas < 0 || *o.MaxReplicas > MaxPoolReplicas) {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), *o.MaxReplicas, fmt.Sprintf("must be between 0 and %d", MaxPoolReplicas)))
	}
	if o.MinReplicas != nil && o.MaxReplicas != nil && *o.MaxReplicas < *o.MinReplicas {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), *o.MaxReplicas, fmt.Sprintf("must be >= minReplicas (%d)", *o.MinReplicas)))
	}
	if r := o.RecurrenceRule; r != nil {
		rp := path.Child("recurrenceRule")
		if !slices.Contains(frequencies, r.Frequency) {
			errs = append(errs, field.NotSupported(rp.Child("frequency"), r.Frequency, frequencies))
		}
		if r.UntilTime != nil && !r.UntilTime.After(o.StartTime.Time) {
			errs = append(errs, field.Invalid(rp.Child("untilTime"), r.UntilTime.UTC().Format("2006-01-02T15:04:05Z07:00"), "must be after startTime"))
		}
		if r.Frequency != "" && o.EndTime.Sub(o.StartTime.Time) > recurrencePeriodMin(r.Frequency) {
			errs = append(errs, field.Invalid(path.Child("endTime"), o.EndTime.UTC().Format("2006-01-02T15:04:05Z07:00"), "the window must not be longer than its recurrence period"))
		}
	}
	return errs
}
