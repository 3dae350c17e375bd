package workflows

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateScaleSet checks a pool's scaleSet section (after WithDefaults) and what it rules out
// elsewhere in the pool; path is the pool's. Scope, runner group, labels and bounds are the
// pool's own fields, checked by Validate.
func (s PoolSpec) validateScaleSet(path *field.Path) field.ErrorList {
	ss := s.ScaleSet
	if ss == nil {
		return nil
	}
	p := path.Child("scaleSet")
	var errs field.ErrorList
	switch name := ss.Name; {
	case name == "":
		errs = append(errs, field.Required(p.Child("name"), "the set's name at GitHub"))
	case len(name) > maxLabelLength:
		errs = append(errs, field.TooLong(p.Child("name"), name, maxLabelLength))
	case strings.ContainsAny(name, ", \t\r\n"):
		// Jobs select a set by its name with runs-on, as they do a label.
		errs = append(errs, field.Invalid(p.Child("name"), name, "must not contain commas or whitespace"))
	}
	if s.Pull != nil {
		errs = append(errs, field.Forbidden(path.Child("pull"), "a scale-set pool hears its demand from the set's listener; remove pull or scaleSet"))
	}
	if !s.IsEphemeral() {
		errs = append(errs, field.Forbidden(path.Child("ephemeral"), "a scale set's runners are just-in-time runners, one job each; remove ephemeral: false or scaleSet"))
	}
	if len(s.Clusters) > 0 {
		// The set's configuration is written into a Secret on the worker's own cluster.
		errs = append(errs, field.Forbidden(path.Child("clusters"), "a scale set's runners run on the worker's own cluster in this version; remove clusters or scaleSet"))
	}
	if s.WarmRegistrations > 0 {
		errs = append(errs, field.Forbidden(path.Child("warmRegistrations"), "a scale-set pool's runners get their configurations from the set as they start; remove warmRegistrations or scaleSet"))
	}
	return errs
}
