package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// A scale set's runner (RunnerSpec.ScaleSetID) lives the runner workflow's one lifecycle; only
// its registration and removal go to the set's service instead of the REST API, so its
// lifecycle costs no REST call. No history before scale sets has a ScaleSetID, so the REST
// path's commands are unchanged.

// register registers the runner: at the scale set (its JIT configuration written into the
// runner's Secret; the pod is created next, owned by that Secret), or through REST.
func (r *runner) register(ctx workflow.Context, in RegisterRunnerInput) (RegisterRunnerOutput, error) {
	if r.in.Spec.ScaleSetID == 0 && in.PodFirst {
		return registerIntoWaitingPod(ctx, in)
	}
	if r.in.Spec.ScaleSetID == 0 {
		return registerRunner(ctx, in)
	}
	policy := ScaleSetActivityPolicy
	if in.PodFirst {
		policy = CredentialScaleSetRegistrationPolicy // a step of the credential window, bounded as REST's
	}
	out, err := runActivity[CreateScaleSetRunnerInput, CreateScaleSetRunnerOutput](ctx, policy, ActivityCreateScaleSetRunner, CreateScaleSetRunnerInput{
		Pool: in.Pool, Name: in.Name, WorkflowID: in.WorkflowID, Namespace: in.Namespace,
		Scope: in.Scope, ScaleSetID: r.in.Spec.ScaleSetID, WorkFolder: in.WorkFolder, PodFirst: in.PodFirst,
	})
	if err != nil {
		return RegisterRunnerOutput{}, err
	}
	return RegisterRunnerOutput{RunnerID: out.RunnerID, SecretName: out.SecretName, SecretUID: out.SecretUID}, nil
}

// unregister removes the runner's registration, retrying while its job runs (a busy runner is
// never removed): at the scale set, or through REST. forced is a force-removed runner's, whose
// pod is gone: its job is about to fail, so the wait is bounded.
func (r *runner) unregister(ctx workflow.Context, forced bool) error {
	if r.in.Spec.ScaleSetID == 0 {
		var err error
		if forced {
			_, err = removeForcedRunner(ctx, r.runnerRef())
		} else {
			_, err = removeRunner(ctx, r.runnerRef())
		}
		return err
	}
	policy := ScaleSetRunnerRemovalPolicy
	if forced {
		policy = ScaleSetForcedRunnerRemovalPolicy
	}
	rm := RemoveScaleSetRunnerInput{Scope: r.in.Spec.Scope, RunnerID: r.reg.RunnerID}
	if rm.RunnerID == 0 {
		// A pod-first registration that failed mid-step (writeCredential) may exist at the
		// set without its id known: look for it by name.
		rm.Name, rm.ScaleSetID = r.in.Name, r.in.Spec.ScaleSetID
	}
	_, err := runActivity[RemoveScaleSetRunnerInput, RemoveScaleSetRunnerOutput](ctx, policy, ActivityRemoveScaleSetRunner, rm)
	return err
}
