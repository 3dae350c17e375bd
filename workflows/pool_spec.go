package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultNamespace is where runners go when a pool names no namespace (kubectl's default too).
const DefaultNamespace = "default"

// WithDefaults returns a copy of the spec with every omitted setting filled in. It does not
// touch MaxReplicas: a pool without a maximum is an error, not a default.
func (s PoolSpec) WithDefaults() PoolSpec {
	out := s
	if out.Ephemeral == nil {
		out.Ephemeral = ptr(true)
	}
	if out.Namespace == "" {
		out.Namespace = DefaultNamespace
	}
	if out.ScaleDownDelay == nil {
		out.ScaleDownDelay = &metav1.Duration{Duration: DefaultScaleDownDelay}
	}
	if out.ReservationDuration == nil {
		out.ReservationDuration = &metav1.Duration{Duration: DefaultReservationDuration}
	}
	if out.RegistrationTimeout == nil {
		out.RegistrationTimeout = &metav1.Duration{Duration: DefaultRegistrationTimeout}
	}
	if out.Pull != nil {
		out.Pull = ptr(out.Pull.withDefaults())
	}
	if out.ScaleSet != nil {
		out.ScaleSet = ptr(out.ScaleSet.withDefaults(out.Name))
	}
	return out
}

// Scope returns where the pool's runners register.
func (s PoolSpec) Scope() Scope {
	return Scope{Repository: s.Repository, Organization: s.Organization, Enterprise: s.Enterprise}
}

// IsEphemeral reports whether runners run one job each (the default).
func (s PoolSpec) IsEphemeral() bool { return s.Ephemeral == nil || *s.Ephemeral }

// Stateful reports whether runners fill slots whose claims outlive them.
func (s PoolSpec) Stateful() bool { return len(s.VolumeClaimTemplates) > 0 }

// Bounds returns the spec's own min, max and minIdle (no override, no operator scale).
func (s PoolSpec) Bounds() Bounds {
	b := Bounds{Min: s.MinReplicas, MinIdle: s.MinIdle}
	if s.MaxReplicas != nil {
		b.Max = *s.MaxReplicas
	}
	return b
}

// ScaleDownDelayOrDefault, ReservationDurationOrDefault and RegistrationTimeoutOrDefault read
// a duration or its policy default.
func (s PoolSpec) ScaleDownDelayOrDefault() time.Duration {
	return durationOr(s.ScaleDownDelay, DefaultScaleDownDelay)
}

// ReservationDurationOrDefault: see ScaleDownDelayOrDefault.
func (s PoolSpec) ReservationDurationOrDefault() time.Duration {
	return durationOr(s.ReservationDuration, DefaultReservationDuration)
}

// RegistrationTimeoutOrDefault: see ScaleDownDelayOrDefault.
func (s PoolSpec) RegistrationTimeoutOrDefault() time.Duration {
	return durationOr(s.RegistrationTimeout, DefaultRegistrationTimeout)
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// runnerIdentity is everything that is fixed when a runner is created: changing any of it
// needs a new runner (labels and group are set at registration; the pod cannot be edited).
type runnerIdentity struct {
	Scope                Scope
	Labels               []string
	RunnerGroup          string
	Ephemeral            bool
	Namespace            string
	WorkFolder           string
	Template             any
	VolumeClaimTemplates any
}

// TemplateHash is a stable hash of everything that forces a new runner when it changes: the
// pod template, the claim templates, scope, labels, group, ephemeral, namespace and work folder.
// Runners made from an older hash are outdated and replaced by a rollout. encoding/json writes
// struct fields in declaration order and map keys sorted, so the hash is canonical.
func (s PoolSpec) TemplateHash() string {
	labels := slices.Clone(s.Labels)
	slices.Sort(labels)
	id := runnerIdentity{
		Scope:                s.Scope(),
		Labels:               labels,
		RunnerGroup:          s.RunnerGroup,
		Ephemeral:            s.IsEphemeral(),
		Namespace:            s.Namespace,
		WorkFolder:           s.WorkFolder,
		Template:             s.Template,
		VolumeClaimTemplates: s.VolumeClaimTemplates,
	}
	// Marshal cannot fail here: API types hold no channels, funcs or NaNs.
	data, _ := json.Marshal(id)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
}

// registrationIdentity is what a runner's GitHub registration and its Secret are bound to.
type registrationIdentity struct {
	Scope       Scope
	Labels      []string
	RunnerGroup string
	Namespace   string
	WorkFolder  string
}

// RegistrationHash is a stable hash of what a JIT registration is made for: scope, labels,
// runner group and work folder (in the JIT configuration) and the namespace of its Secret. A
// warm registration minted under another hash is removed, not handed to a runner; a new pod
// template alone keeps them.
func (s PoolSpec) RegistrationHash() string {
	labels := slices.Clone(s.Labels)
	slices.Sort(labels)
	data, _ := json.Marshal(registrationIdentity{
		Scope: s.Scope(), Labels: labels, RunnerGroup: s.RunnerGroup, Namespace: s.Namespace, WorkFolder: s.WorkFolder,
	})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
}

// SlotClaimName is the PersistentVolumeClaim of one claim template in one slot of a stateful
// pool: stable, so the next runner in the slot mounts the same volume.
func SlotClaimName(pool, claim string, slot int) string {
	return pool + "-" + claim + "-" + strconv.Itoa(slot)
}

// runnerSpec is the part of the pool every runner workflow gets.
func (s PoolSpec) runnerSpec(hash string) RunnerSpec {
	return RunnerSpec{
		Scope:               s.Scope(),
		Labels:              slices.Clone(s.Labels),
		RunnerGroup:         s.RunnerGroup,
		Ephemeral:           s.IsEphemeral(),
		Namespace:           s.Namespace,
		Template:            *s.Template.DeepCopy(),
		TemplateHash:        hash,
		RegistrationTimeout: s.RegistrationTimeoutOrDefault(),
		WorkFolder:          s.WorkFolder,
	}
}

// slotVolumes binds each claim template to the slot's claim.
func (s PoolSpec) slotVolumes(slot int) []SlotVolume {
	out := make([]SlotVolume, 0, len(s.VolumeClaimTemplates))
	for _, t := range s.VolumeClaimTemplates {
		out = append(out, SlotVolume{VolumeName: t.Name, ClaimName: SlotClaimName(s.Name, t.Name, slot)})
	}
	return out
}

// SearchAttributes are the pool workflow's search attributes for this spec: the starter routes
// jobs by them, so `starter apply` sets them at start and the pool keeps them current.
func (s PoolSpec) SearchAttributes() temporal.SearchAttributes {
	updates := []temporal.SearchAttributeUpdate{
		SearchAttrPool.ValueSet(s.Name),
		SearchAttrPoolScope.ValueSet(s.Scope().String()),
		SearchAttrPoolLabels.ValueSet(s.lowerLabels()),
	}
	if s.RunnerGroup != "" {
		updates = append(updates, SearchAttrPoolGroup.ValueSet(s.RunnerGroup))
	}
	return temporal.NewSearchAttributes(updates...)
}

// lowerLabels are the labels as routing compares them (GitHub matches labels case-insensitively).
func (s PoolSpec) lowerLabels() []string {
	out := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = strings.ToLower(l)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
