package workflows

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePull checks a pool's pull section (after WithDefaults); path is the section's.
func (s PoolSpec) validatePull(path *field.Path) field.ErrorList {
	p := s.Pull
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	if d := p.Interval; d != nil && d.Duration < MinPullInterval {
		errs = append(errs, field.Invalid(path.Child("interval"), d.Duration.String(), fmt.Sprintf("must be >= %s", MinPullInterval)))
	}
	switch p.Metric {
	case "":
		return append(errs, field.Required(path.Child("metric"), fmt.Sprintf("%s or %s", PullMetricQueuedJobs, PullMetricBusyPercentage)))
	case PullMetricQueuedJobs:
		errs = append(errs, s.validatePullRepositories(path.Child("repositories"))...)
		for _, f := range p.busyFields() {
			if f.value != nil {
				errs = append(errs, field.Forbidden(path.Child(f.name), "only the "+PullMetricBusyPercentage+" metric has thresholds and factors"))
			}
		}
	case PullMetricBusyPercentage:
		if len(p.Repositories) > 0 {
			errs = append(errs, field.Forbidden(path.Child("repositories"), "only the "+PullMetricQueuedJobs+" metric reads repositories"))
		}
		errs = append(errs, p.validateBusy(path)...)
	default:
		errs = append(errs, field.NotSupported(path.Child("metric"), p.Metric, []string{PullMetricQueuedJobs, PullMetricBusyPercentage}))
	}
	return errs
}

// busyFields are the busy metric's settings with their field names, in a fixed order (a
// slice, not a map: a pool's start validates in workflow code).
func (p PullSpec) busyFields() []namedFloat {
	return []namedFloat{
		{"scaleUpThreshold", p.ScaleUpThreshold}, {"scaleDownThreshold", p.ScaleDownThreshold},
		{"scaleUpFactor", p.ScaleUpFactor}, {"scaleDownFactor", p.ScaleDownFactor},
	}
}

type namedFloat struct {
	name  string
	value *float64
}

// validatePullRepositories: a repository pool reads its own repository; an organization pool
// names its repositories, an enterprise pool names them with their owners.
func (s PoolSpec) validatePullRepositories(path *field.Path) field.ErrorList {
	repos := s.Pull.Repositories
	switch {
	case s.Repository != "" && len(repos) > 0:
		return field.ErrorList{field.Forbidden(path, "a repository pool reads its own repository; remove repositories")}
	case s.Repository != "":
		return nil
	case len(repos) == 0:
		return field.ErrorList{field.Required(path, "the repositories whose jobs the pool serves")}
	case len(repos) > MaxPullRepositories:
		return field.ErrorList{field.TooMany(path, len(repos), MaxPullRepositories)}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, r := range repos {
		if msg := s.pullRepositoryProblem(r); msg != "" {
			errs = append(errs, field.Invalid(path.Index(i), r, msg))
			continue
		}
		if seen[strings.ToLower(r)] {
			errs = append(errs, field.Duplicate(path.Index(i), r))
		}
		seen[strings.ToLower(r)] = true
	}
	return errs
}

func (s PoolSpec) pullRepositoryProblem(r string) string {
	if s.Organization != "" {
		if !githubRepoName.MatchString(r) || r == "." || r == ".." {
			return "must be a repository name of the organization (letters, digits, '.', '_', '-')"
		}
		return ""
	}
	owner, name, ok := strings.Cut(r, "/")
	if !ok || !githubLogin.MatchString(owner) || !githubRepoName.MatchString(name) {
		return `must be "owner/repo"`
	}
	return ""
}

// validateBusy: thresholds are shares of the runners, the up threshold above the down one; the
// up factor grows the pool and the down factor shrinks it.
func (p PullSpec) validateBusy(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	share := func(name string, v *float64) {
		if v != nil && (*v <= 0 || *v > 1) {
			errs = append(errs, field.Invalid(path.Child(name), *v, "must be > 0 and <= 1"))
		}
	}
	share("scaleUpThreshold", p.ScaleUpThreshold)
	share("scaleDownThreshold", p.ScaleDownThreshold)
	if up, down := p.ScaleUpThreshold, p.ScaleDownThreshold; up != nil && down != nil && *down >= *up {
		errs = append(errs, field.Invalid(path.Child("scaleDownThreshold"), *down, fmt.Sprintf("must be < scaleUpThreshold (%g)", *up)))
	}
	if f := p.ScaleUpFactor; f != nil && *f <= 1 {
		errs = append(errs, field.Invalid(path.Child("scaleUpFactor"), *f, "must be > 1"))
	}
	if f := p.ScaleDownFactor; f != nil && (*f <= 0 || *f >= 1) {
		errs = append(errs, field.Invalid(path.Child("scaleDownFactor"), *f, "must be > 0 and < 1"))
	}
	return errs
}
