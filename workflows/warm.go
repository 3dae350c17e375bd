package workflows

import (
	"cmp"
	"slices"
	"time"
)

// WarmRegistration is a runner registration a pool minted ahead, in quiet time: a runner name
// allocated as any runner's (RunnerName), registered at GitHub as an offline JIT runner with the
// pool's labels, its JIT configuration in the Secret of that name. A runner the pool starts takes
// it and makes no GitHub call before its pod; the credential itself never reaches the history
// (RegisterRunner returns only the runner id and the Secret's name).
type WarmRegistration struct {
	Name string `json:"name"`
	Seq  int64  `json:"seq"`
	// RegistrationHash is the spec's RegistrationHash when it was minted; a registration minted
	// for other labels, group, scope or namespace is never handed to a runner.
	RegistrationHash string `json:"registrationHash"`
	// Scope and Namespace say where to remove it, whatever the spec says by then.
	Scope      Scope  `json:"scope"`
	Namespace  string `json:"namespace"`
	RunnerID   int64  `json:"runnerId,omitempty"`
	SecretName string `json:"secretName,omitempty"`
	// SecretUID lets the runner that takes it create its pod owned by the Secret; empty for
	// registrations minted before that.
	SecretUID string `json:"secretUid,omitempty"`
	// MintedAt is when GitHub registered it; zero while the mint is under way.
	MintedAt time.Time `json:"mintedAt,omitzero"`
	// Retiring says why it is being removed; empty while it is kept.
	Retiring string `json:"retiring,omitempty"`
	// SecretNamespace is where its Secret is kept (changeWarmApart): the worker's warm
	// namespace, out of every runner pod's reach, or the runner namespace itself when the worker
	// keeps them there. Empty for registrations minted before, whose Secret is in Namespace,
	// readable wherever the runners' pods may read Secrets.
	SecretNamespace string `json:"secretNamespace,omitempty"`
}

// secretRef is where the registration's Secret is.
func (w WarmRegistration) secretRef() SecretRef {
	return SecretRef{Namespace: cmp.Or(w.SecretNamespace, w.Namespace), Name: w.Name}
}

// Why a warm registration is removed.
const (
	WarmSurplus    = "surplus"
	WarmRefresh    = "refresh"
	WarmExpired    = "expired"
	WarmOutdated   = "outdated registration"
	WarmMintFailed = "mint failed"
	WarmExposed    = "kept in the runner namespace"
)

// ready reports whether a starting runner may take the registration now.
func (w WarmRegistration) ready(now time.Time, hash string) bool {
	return w.Retiring == "" && !w.MintedAt.IsZero() && w.RegistrationHash == hash &&
		now.Sub(w.MintedAt) < WarmRegistrationMaxAge
}

// WarmInput is everything the warm-registration decision depends on.
type WarmInput struct {
	Now time.Time
	// Want is how many the pool keeps: warmRegistrations, capped by max; 0 while draining.
	Want int
	// Hash is the current spec's RegistrationHash.
	Hash string
	Warm []WarmRegistration
	// InFlight names the registrations with a mint or removal under way.
	InFlight []string
	// Quiet is true while no runner of the pool is starting and no reservation waits for one:
	// warm work never competes with a burst's own registrations for the GitHub queue.
	Quiet bool
	// NotBefore holds warm work back after a failed call.
	NotBefore time.Time
	// Apart is true once registrations are minted into the worker's warm namespace
	// (changeWarmApart): those minted before, in the runner namespace, are then retired.
	Apart bool
}

// WarmPlan is what the pool does with its warm registrations now.
type WarmPlan struct {
	// Retire marks registrations for removal (no runner takes them any more).
	Retire []DrainRunner
	// Mint is how many new registrations to mint now.
	Mint int
	// Remove lists the retiring registrations whose removal starts now.
	Remove []string
	// WakeAt is when the next registration is due for refresh or expires (zero: none).
	WakeAt time.Time
}

// PlanWarm decides the pool's warm registrations. The rules:
//   - all warm work waits for a quiet pool and, after a failed call, for NotBefore;
//   - registrations minted for another RegistrationHash, or older than WarmRegistrationMaxAge,
//     are retired, and so are those kept in the runner namespace before warm namespaces
//     (Apart): any pod there that may read Secrets could take them;
//   - registrations older than WarmRegistrationRefreshAge are retired once enough younger ones
//     exist, so a refresh mints the replacement before it removes the old one;
//   - beyond Want, the oldest are retired; below it, new ones are minted;
//   - at most WarmRegistrationBatch calls are in flight: mints first, then removals.
func PlanWarm(in WarmInput) WarmPlan {
	var plan WarmPlan
	if !in.Quiet {
		return plan
	}
	if in.Now.Before(in.NotBefore) {
		plan.WakeAt = in.NotBefore
		return plan
	}
	var keep, aged []WarmRegistration
	for _, w := range in.Warm {
		age := in.Now.Sub(w.MintedAt)
		switch {
		case w.Retiring != "":
		case w.RegistrationHash != in.Hash:
			plan.retire(w, WarmOutdated)
		case in.Apart && w.SecretNamespace == "" && !w.MintedAt.IsZero():
			plan.retire(w, WarmExposed)
		case w.MintedAt.IsZero():
			keep = append(keep, w) // being minted
		case age >= WarmRegistrationMaxAge:
			plan.retire(w, WarmExpired)
		case age >= WarmRegistrationRefreshAge:
			aged = append(aged, w)
			plan.wakeAt(w.MintedAt.Add(WarmRegistrationMaxAge))
		default:
			keep = append(keep, w)
			plan.wakeAt(w.MintedAt.Add(WarmRegistrationRefreshAge))
		}
	}
	if len(keep) < in.Want {
		plan.Mint = in.Want - len(keep)
	} else {
		for _, w := range aged {
			plan.retire(w, WarmRefresh)
		}
		plan.retireSurplus(keep, len(keep)-in.Want)
	}
	slots := max(WarmRegistrationBatch-len(in.InFlight), 0)
	plan.Mint = min(plan.Mint, slots)
	plan.Remove = removable(in.Warm, plan.Retire, in.InFlight, slots-plan.Mint)
	return plan
}

func (p *WarmPlan) retire(w WarmRegistration, reason string) {
	p.Retire = append(p.Retire, DrainRunner{Name: w.Name, Reason: reason})
}

func (p *WarmPlan) wakeAt(t time.Time) {
	if p.WakeAt.IsZero() || t.Before(p.WakeAt) {
		p.WakeAt = t
	}
}

// retireSurplus retires n of the kept registrations, the oldest first (they would be the next
// to need a refresh); one being minted is never retired.
func (p *WarmPlan) retireSurplus(keep []WarmRegistration, n int) {
	minted := slices.DeleteFunc(slices.Clone(keep), func(w WarmRegistration) bool { return w.MintedAt.IsZero() })
	slices.SortStableFunc(minted, func(a, b WarmRegistration) int {
		return cmp.Or(a.MintedAt.Compare(b.MintedAt), cmp.Compare(a.Seq, b.Seq))
	})
	for _, w := range minted[:min(max(n, 0), len(minted))] {
		p.retire(w, WarmSurplus)
	}
}

// removable lists up to n retiring registrations (already retiring or retired now) with no call
// under way, in list order.
func removable(warm []WarmRegistration, retired []DrainRunner, inFlight []string, n int) []string {
	var out []string
	for _, w := range warm {
		if len(out) >= n {
			break
		}
		now := slices.ContainsFunc(retired, func(d DrainRunner) bool { return d.Name == w.Name })
		if (w.Retiring != "" || now) && !slices.Contains(inFlight, w.Name) {
			out = append(out, w.Name)
		}
	}
	return out
}
