package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Pool change ids of warm work (workflow.GetVersion); what each changes is in Changes
// (changes.go). Both are asked only when the pool has warm work, so histories of pools without
// warm registrations carry no marker.
const (
	changeWarmRegistrations = "warm-registrations"
	changeWarmApart         = "warm-registrations-apart"
)

// warmWant is how many warm registrations the pool keeps now: the spec's, capped by the max in
// force (a pool scaled down needs fewer); none while draining or for persistent runners, which
// register with a token.
func (p *poolRun) warmWant(now time.Time) int {
	if p.st.Mode == PoolDraining || !p.st.Spec.IsEphemeral() {
		return 0
	}
	return min(p.st.Spec.WarmRegistrations, p.bounds(now).Max)
}

// tendWarm mints, refreshes and removes warm registrations as PlanWarm decides. A paused pool
// leaves them as they are.
func (p *poolRun) tendWarm(now time.Time) {
	p.warmWake = time.Time{}
	if p.st.Mode == PoolPaused || (p.st.Spec.WarmRegistrations == 0 && len(p.st.Warm) == 0 && len(p.st.WarmSpent) == 0) {
		return
	}
	if workflow.GetVersion(p.ctx, changeWarmRegistrations, workflow.DefaultVersion, 1) < 1 {
		return
	}
	p.warmApart = workflow.GetVersion(p.ctx, changeWarmApart, workflow.DefaultVersion, 1) >= 1
	notBefore := p.st.WarmNotBefore
	if p.lean {
		notBefore = warmNotBefore(p.st.WarmNotBefore, p.st.LastScaleOut)
	}
	quiet := p.quiet()
	plan := PlanWarm(WarmInput{
		Now: now, Want: p.warmWant(now), Hash: p.st.Spec.RegistrationHash(), Warm: p.st.Warm,
		InFlight: p.warmBusy, Quiet: quiet, NotBefore: notBefore, Apart: p.warmApart,
	})
	if quiet {
		p.removeSpentWarm()
	}
	p.warmWake = plan.WakeAt
	for _, r := range plan.Retire {
		p.st.Warm[p.findWarm(r.Name)].Retiring = r.Reason
	}
	for range plan.Mint {
		p.mintWarm()
	}
	for _, name := range plan.Remove {
		p.removeWarm(p.st.Warm[p.findWarm(name)])
	}
	if plan.Mint > 0 || len(plan.Remove) > 0 {
		p.logger.Info("Warm registrations", "minting", plan.Mint, "removing", len(plan.Remove), "ready", p.warmReady(now))
	}
}

// quiet is true while no runner is starting and no reservation waits for a runner: the GitHub
// queue then serves no registration of this pool's, and warm work cannot delay one.
func (p *poolRun) quiet() bool {
	if len(p.plan.Start) > 0 {
		return false
	}
	staying := 0
	for _, r := range p.st.Runners {
		switch {
		case r.State == RunnerPending || r.State == RunnerRegistering:
			return false
		case !r.Draining && r.State != RunnerDraining:
			staying++
		}
	}
	return p.plan.Desired <= staying
}

// warmNotBefore is when warm work may go on: after the back-off of a failed call, and
// WarmRefillSettle after the pool last started runners (a burst's webhooks reach the pool over
// several scale windows; a pool quiet between two of them has not seen the whole burst).
func warmNotBefore(failedBackoff, lastScaleOut time.Time) time.Time {
	if settled := lastScaleOut.Add(WarmRefillSettle); !lastScaleOut.IsZero() && settled.After(failedBackoff) {
		return settled
	}
	return failedBackoff
}

// takeWarm hands the oldest ready warm registration to a starting runner (ephemeral pools only).
// A registration kept apart from the runner namespace is copied there by its runner; the copy
// it leaves behind is spent, removed when the pool is next quiet (removeSpentWarm).
func (p *poolRun) takeWarm(now time.Time) (WarmRegistration, bool) {
	if len(p.st.Warm) == 0 || !p.st.Spec.IsEphemeral() {
		return WarmRegistration{}, false
	}
	hash := p.st.Spec.RegistrationHash()
	for i, w := range p.st.Warm {
		if w.ready(now, hash) {
			p.st.Warm = slices.Delete(p.st.Warm, i, i+1)
			if w.apart() {
				p.st.WarmSpent = append(p.st.WarmSpent, w.secretRef())
			}
			return w, true
		}
	}
	return WarmRegistration{}, false
}

// apart reports whether the registration's Secret is outside the runner namespace.
func (w WarmRegistration) apart() bool {
	return w.SecretNamespace != "" && w.SecretNamespace != w.Namespace
}

// removeSpentWarm deletes the Secrets that taken warm registrations left in the warm namespace,
// up to WarmSpentBatch of one namespace in one request. It runs only while the pool is quiet:
// then no runner is between taking its registration and reporting idle, so every one of them
// has made its own copy (or ended, removing its registration). A failure leaves the names for
// the next quiet moment.
func (p *poolRun) removeSpentWarm() {
	if len(p.st.WarmSpent) == 0 || p.warmSpentBusy {
		return
	}
	ns := p.st.WarmSpent[0].Namespace
	var names []string
	for _, s := range p.st.WarmSpent {
		if s.Namespace == ns && len(names) < WarmSpentBatch {
			names = append(names, s.Name)
		}
	}
	in := DeleteWarmSecretsInput{Namespace: ns, Pool: p.st.Spec.Name, Names: names}
	p.inflight++
	p.warmSpentBusy = true
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		_, err := deleteWarmSecrets(ctx, in)
		p.inflight--
		p.warmSpentBusy = false
		p.changed = true
		if err != nil {
			p.logger.Warn("Removing spent warm Secrets failed", "namespace", ns, "count", len(names), "error", err)
			return
		}
		p.st.WarmSpent = slices.DeleteFunc(p.st.WarmSpent, func(s SecretRef) bool {
			return s.Namespace == ns && slices.Contains(names, s.Name)
		})
	})
}

// unusedWarm takes back the warm registration of a runner whose workflow never started, to be
// removed: no runner owns it.
func (p *poolRun) unusedWarm(in RunnerInput, reason string) {
	if in.Warm == nil {
		return
	}
	w := WarmRegistration{
		Name: in.Name, Scope: in.Spec.Scope, Namespace: in.Spec.Namespace, RunnerID: in.Warm.RunnerID,
		SecretName: in.Warm.SecretName, MintedAt: workflow.Now(p.ctx), Retiring: reason,
		SecretNamespace: in.Warm.SecretNamespace,
	}
	// Its removal deletes the Secret itself; it is no longer spent.
	p.st.WarmSpent = slices.DeleteFunc(p.st.WarmSpent, func(s SecretRef) bool { return s == w.secretRef() })
	p.st.Warm = append(p.st.Warm, w)
	p.changed = true
}

func (p *poolRun) warmReady(now time.Time) int {
	hash := p.st.Spec.RegistrationHash()
	n := 0
	for _, w := range p.st.Warm {
		if w.ready(now, hash) {
			n++
		}
	}
	return n
}

func (p *poolRun) findWarm(name string) int {
	return slices.IndexFunc(p.st.Warm, func(w WarmRegistration) bool { return w.Name == name })
}

// mintWarm allocates the next runner name and registers it at GitHub with the runner workflow
// id it will have, so the runner that takes it owns its Secret (and a later attempt of that
// runner adopts or replaces it as RegisterRunner does for any runner).
func (p *poolRun) mintWarm() {
	spec := p.st.Spec
	seq := p.st.NextSeq
	p.st.NextSeq++
	name := RunnerName(spec.Name, p.st.Generation, seq)
	p.st.Warm = append(p.st.Warm, WarmRegistration{
		Name: name, Seq: seq, RegistrationHash: spec.RegistrationHash(), Scope: spec.Scope(), Namespace: spec.Namespace,
	})
	in := RegisterRunnerInput{
		Pool: spec.Name, Name: name, WorkflowID: RunnerWorkflowID(spec.Name, name), Namespace: spec.Namespace,
		Scope: spec.Scope(), Labels: slices.Clone(spec.Labels), RunnerGroup: spec.RunnerGroup,
		Mode: RegistrationJIT, WorkFolder: spec.WorkFolder, Warm: p.warmApart,
	}
	p.warmCall(name, func(ctx workflow.Context) error {
		reg, err := runActivity[RegisterRunnerInput, RegisterRunnerOutput](ctx, WarmRegistrationPolicy, ActivityRegisterRunner, in)
		i := p.findWarm(name)
		if i < 0 {
			return err // cannot happen: an entry being minted is neither taken nor removed
		}
		w := &p.st.Warm[i]
		if err != nil {
			// It may exist at GitHub or as a Secret all the same: removal looks it up by name.
			w.Retiring = WarmMintFailed
			return fmt.Errorf("mint warm registration %s: %w", name, err)
		}
		w.RunnerID, w.SecretName, w.SecretUID, w.MintedAt = reg.RunnerID, reg.SecretName, reg.SecretUID, workflow.Now(ctx)
		if p.warmApart {
			// A worker from before warm namespaces answers with none: its Secret is in the
			// runner namespace, and saying so keeps it from being retired as one minted before.
			w.SecretNamespace = cmp.Or(reg.SecretNamespace, w.Namespace)
		}
		return nil
	})
}

// removeWarm removes a retiring registration: at GitHub first (one DELETE; gone is success),
// then its Secret, then from the pool's list.
func (p *poolRun) removeWarm(w WarmRegistration) {
	p.warmCall(w.Name, func(ctx workflow.Context) error {
		ref := RunnerRef{Scope: w.Scope, RunnerID: w.RunnerID, Name: w.Name}
		if _, err := runActivity[RunnerRef, RemoveRunnerOutput](ctx, WarmRegistrationPolicy, ActivityRemoveRunner, ref); err != nil {
			return fmt.Errorf("remove warm registration %s from GitHub: %w", w.Name, err)
		}
		if _, err := deleteRunnerSecret(ctx, w.secretRef()); err != nil {
			return fmt.Errorf("delete secret of warm registration %s: %w", w.Name, err)
		}
		if i := p.findWarm(w.Name); i >= 0 {
			p.st.Warm = slices.Delete(p.st.Warm, i, i+1)
		}
		return nil
	})
}

// warmCall runs one warm registration's call beside the loop, as the pool runs its listing;
// continue-as-new waits for it. A failure holds warm work back, longer after each in a row.
func (p *poolRun) warmCall(name string, call func(ctx workflow.Context) error) {
	p.inflight++
	p.warmBusy = append(p.warmBusy, name)
	workflow.Go(p.ctx, func(ctx workflow.Context) {
		err := call(ctx)
		p.inflight--
		p.warmBusy = slices.DeleteFunc(p.warmBusy, func(n string) bool { return n == name })
		p.changed = true
		if err == nil {
			p.st.WarmFailures = 0
			return
		}
		p.st.WarmFailures++
		backoff := min(WarmRetryDelay<<min(p.st.WarmFailures-1, 16), WarmRetryDelayMax)
		p.st.WarmNotBefore = workflow.Now(ctx).Add(backoff)
		p.logger.Warn("Warm registration call failed", "runner", name, "error", err, "backoff", backoff)
	})
}
