package workflows

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePrewarm checks the prewarm section (a rule of ValidateNew: no running pool has one).
// Prewarming adds predicted runners to the reservations a webhook pool counts (Decide), so it
// is offered where that count is the pool's demand and a warmed runner serves one job:
//   - ephemeral pools only: a persistent runner stays after its job, and the pool's idle
//     runners already serve the next one;
//   - not with pull: a pull pool's demand is GitHub's count of queued jobs (DecidePull),
//     which replaces the reservations the prediction is added to;
//   - not with scaleSet: a scale set's demand is its statistics (ScaleSetDemand), likewise.
func (s PoolSpec) validatePrewarm(path *field.Path) field.ErrorList {
	pw := s.Prewarm
	if pw == nil {
		return nil
	}
	p := path.Child("prewarm")
	var errs field.ErrorList
	if g := pw.Grace; g != nil && (g.Duration <= 0 || g.Duration > MaxPrewarmGrace) {
		errs = append(errs, field.Invalid(p.Child("grace"), g.Duration.String(), fmt.Sprintf("must be > 0 and <= %s", MaxPrewarmGrace)))
	}
	if !pw.Enabled {
		return errs
	}
	if !s.IsEphemeral() {
		errs = append(errs, field.Forbidden(p.Child("enabled"),
			"only ephemeral pools prewarm (a persistent runner stays after its job and takes the next one); remove prewarm or ephemeral: false"))
	}
	if s.Pull != nil {
		errs = append(errs, field.Forbidden(p.Child("enabled"),
			"a pull pool's demand is GitHub's count of queued jobs, which prewarming cannot add to yet; remove prewarm or pull"))
	}
	if s.ScaleSet != nil {
		errs = append(errs, field.Forbidden(p.Child("enabled"),
			"a scale-set pool's demand is its set's statistics, which prewarming cannot add to yet; remove prewarm or scaleSet"))
	}
	return errs
}
