package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"go.temporal.io/sdk/workflow"
)

// The credential window (changeSecretAfterScheduling). A JIT runner's credential is usable by
// whoever reads it first until its own runner connects, and a job whose ServiceAccount may read
// Secrets in the runner namespace could. So it is in that namespace only while its pod needs
// it: the pod is created first, naming a Secret that does not exist yet (unscheduled, it needs
// nothing: quota, a node scaling up and the scheduler's queue cost no exposure); once the pod
// watcher reports it bound to a node the runner registers (or copies its warm registration)
// into that Secret, which the kubelet, retrying a container it could not configure, then reads;
// once the container started (its environment holds the credential, and RestartPolicy Never
// starts no other) or the runner connected, the Secret is deleted. The pod no longer belongs to
// its Secret, which goes first: a runner's end deletes its pod.

// startPodFirst creates the attempt's pod before its Secret exists; the watch loop writes the
// credential once the pod is scheduled (writeCredential).
func (r *runner) startPodFirst(ctx workflow.Context, podIn CreateRunnerPodInput) error {
	// The Secret's name is the runner's whatever writes it (RegisterRunner, a scale set's
	// CreateScaleSetRunner, CopyWarmRunnerSecret).
	podIn.SecretName, podIn.SecretUID, podIn.SecretAfterScheduling = r.in.Name, "", true
	pod, err := createRunnerPod(ctx, podIn)
	if err != nil {
		return fmt.Errorf("create runner pod: %w", err)
	}
	r.notePod(ctx, pod)
	r.obs.Credential = CredentialAwaitingNode
	return nil
}

// writeCredential puts the runner's credential into its Secret, its pod being scheduled: a
// cold runner registers now (the JIT configuration is minted straight into the Secret), a warm
// one copies its registration from the warm namespace. The registration timeout counts from
// here: the runner could not connect before.
func (r *runner) writeCredential(ctx workflow.Context) error {
	if r.in.Warm != nil && r.attempt == 1 {
		out, err := copyWarmSecret(ctx, CopyWarmSecretInput{
			Secret: r.secretRefNamed(r.in.Name), Pool: r.in.Pool, WorkflowID: r.workflowID(),
			Warm: SecretRef{Cluster: r.in.Cluster, Namespace: r.reg.SecretNamespace, Name: r.reg.SecretName},
		})
		if err != nil {
			return fmt.Errorf("copy the warm registration into the runner's secret: %w", err)
		}
		// From here on the runner's Secret is its own copy; the warm one is its pool's.
		r.reg.SecretName, r.reg.SecretUID, r.reg.SecretNamespace = out.SecretName, out.SecretUID, ""
	} else {
		spec := r.in.Spec
		reg, err := r.register(ctx, RegisterRunnerInput{
			Cluster: r.in.Cluster, Pool: r.in.Pool, Name: r.in.Name, WorkflowID: r.workflowID(), Namespace: spec.Namespace,
			Scope: spec.Scope, Labels: spec.Labels, RunnerGroup: spec.RunnerGroup, Mode: r.mode, WorkFolder: spec.WorkFolder,
			PodFirst: true,
		})
		if err != nil {
			r.keepRegistrationOf(err)
			// GitHub (or the scale set) may have registered the runner before the step failed
			// (its Secret's write did not answer): its checks and its end look for it by name
			// (none is success), so a cluster lost mid-step leaves no registration behind.
			r.registered = true
			return fmt.Errorf("register runner: %w", err)
		}
		r.registered, r.reg = true, reg
	}
	r.obs.Credential = CredentialInNamespace
	r.obs.AttemptStart = workflow.Now(ctx)
	return nil
}

// credentialStep carries out the credential step the loop chose.
func (r *runner) credentialStep(ctx workflow.Context, act action) error {
	if act == actWriteCredential {
		return r.writeCredential(ctx)
	}
	return r.retireCredential(ctx)
}

// retireCredential deletes the runner's Secret: its container holds the credential, or its
// runner connected with it. The pod stays: it does not belong to the Secret.
func (r *runner) retireCredential(ctx workflow.Context) error {
	if _, err := retireRunnerSecret(ctx, r.secretRef()); err != nil {
		return fmt.Errorf("delete runner secret once its runner started: %w", err)
	}
	r.reg.SecretName, r.reg.SecretUID = "", ""
	r.obs.Credential = CredentialSpent
	return nil
}

// credentialStepFailed decides on a credential step that failed. A final error (an invalid
// spec, a Secret another workflow owns, a warm Secret that is gone) fails the runner. Anything
// else is taken as its cluster (or GitHub) not answering: the step waits until a pod read
// succeeds again, which the next registration check makes (RegistrationRecheckInterval later,
// or at the registration timeout if that is later; never for a runner online), and the
// cluster-lost clock counts from the step's start, so a cluster lost mid-step is left as one
// lost while the pod waited.
func (r *runner) credentialStepFailed(ctx workflow.Context, err error, began time.Time) (ending, bool) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && (app.NonRetryable() || slices.Contains(retryNonRetryable, app.Type())) {
		return ending{kind: endFailed, failure: err}, true
	}
	r.log.Warn("Runner credential step failed; reading the pod before trying again", "error", err)
	if r.obs.PodUnreadSince.IsZero() {
		r.obs.PodUnreadSince = began
	}
	r.obs.RecheckAt = workflow.Now(ctx).Add(RegistrationRecheckInterval)
	return ending{}, false
}

// stepWaitOf describes a failed step's activity for the status query: its type, its failure
// and, when the failure named one (GitHub's budget at its reserve does), when to try again.
func stepWaitOf(err error, now time.Time) *StepWait {
	w := &StepWait{Failure: err.Error()}
	var act *temporal.ActivityError
	if errors.As(err, &act) {
		w.Activity = act.ActivityType().GetName()
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		w.FailureType, w.Failure = app.Type(), app.Error()
		if d := app.NextRetryDelay(); d > 0 {
			w.RetryAt = now.Add(d)
		}
	}
	return w
}

// secretRefNamed is a Secret of the runner's namespace and cluster.
func (r *runner) secretRefNamed(name string) SecretRef {
	return SecretRef{Cluster: r.in.Cluster, Namespace: r.in.Spec.Namespace, Name: name}
}
