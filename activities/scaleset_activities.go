package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/actions/scaleset"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// ScaleSetActivities call the Actions service through the official scale-set client: sets,
// their runners and (scaleset_sessions.go) their message sessions. Each has one side effect
// and is idempotent; none returns a token or a JIT configuration.
type ScaleSetActivities struct {
	Clients *ScaleSetClients
	Kube    kubernetes.Interface
	// Sessions holds the message sessions this worker opened; ListenerQueue is this worker's
	// own task queue, where their polls go (workflows.ScaleSetListenerTaskQueue).
	Sessions      *ScaleSetSessions
	ListenerQueue string
}

// Register registers the shared-queue activities; RegisterListener those of the worker's own
// listener queue.
func (a *ScaleSetActivities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.EnsureScaleSet, activity.RegisterOptions{Name: workflows.ActivityEnsureScaleSet})
	r.RegisterActivityWithOptions(a.DeleteScaleSet, activity.RegisterOptions{Name: workflows.ActivityDeleteScaleSet})
	r.RegisterActivityWithOptions(a.CreateScaleSetRunner, activity.RegisterOptions{Name: workflows.ActivityCreateScaleSetRunner})
	r.RegisterActivityWithOptions(a.RemoveScaleSetRunner, activity.RegisterOptions{Name: workflows.ActivityRemoveScaleSetRunner})
	r.RegisterActivityWithOptions(a.OpenScaleSetSession, activity.RegisterOptions{Name: workflows.ActivityOpenScaleSetSession})
}

// client returns the scope's client, and a context recording the call's answers.
func (a *ScaleSetActivities) client(ctx context.Context, scope workflows.Scope) (context.Context, *answer, *scaleset.Client, error) {
	if err := scope.Validate(); err != nil {
		return nil, nil, nil, temporal.NewNonRetryableApplicationError("scope: "+err.Error(), workflows.ErrInvalidSpec, nil)
	}
	c, err := a.Clients.For(scope)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, ans := withAnswer(ctx)
	return ctx, ans, c, nil
}

// classify classifies a failed call, dropping the scope's client when the service refused its
// admin token so the retry fetches a fresh one.
func (a *ScaleSetActivities) classify(scope workflows.Scope, call actionsCall, err error, ans *answer) error {
	if status, _ := ans.last(); status == http.StatusUnauthorized {
		a.Clients.Forget(scope)
	}
	return classifyActionsError(call, err, ans)
}

// EnsureScaleSet creates the set, or adopts the one GitHub has by that name in the group and
// brings its labels to the spec. A create that meets a set made meanwhile (400
// RunnerScaleSetExistsException, or 409) is retried, and the retry adopts it.
func (a *ScaleSetActivities) EnsureScaleSet(ctx context.Context, in workflows.EnsureScaleSetInput) (workflows.EnsureScaleSetOutput, error) {
	if strings.TrimSpace(in.Name) == "" || len(in.Labels) == 0 {
		return workflows.EnsureScaleSetOutput{}, temporal.NewNonRetryableApplicationError("a scale set needs a name and labels", workflows.ErrInvalidSpec, nil)
	}
	ctx, ans, c, err := a.client(ctx, in.Scope)
	if err != nil {
		return workflows.EnsureScaleSetOutput{}, err
	}
	groupID := 1 // GitHub's default group, in every scope
	if in.RunnerGroup != "" && !strings.EqualFold(in.RunnerGroup, scaleset.DefaultRunnerGroup) {
		g, err := c.GetRunnerGroupByName(ctx, in.RunnerGroup)
		if status, _ := ans.last(); err != nil && status == http.StatusOK {
			// The service answered, with no group (or several) of that name.
			return workflows.EnsureScaleSetOutput{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("runner group %q not found in %s", in.RunnerGroup, in.Scope), workflows.ErrNotFound, nil)
		}
		if err != nil {
			return workflows.EnsureScaleSetOutput{}, a.classify(in.Scope, callEnsureScaleSet, err, ans)
		}
		groupID = g.ID
	}
	want := &scaleset.RunnerScaleSet{
		Name: in.Name, RunnerGroupID: groupID, Labels: scaleSetLabels(in.Labels),
		// Runner images are pinned by the pool's template; a runner updating itself would
		// restart mid-life.
		RunnerSetting: scaleset.RunnerSetting{DisableUpdate: true},
	}
	have, err := c.GetRunnerScaleSet(ctx, groupID, in.Name)
	if err != nil {
		return workflows.EnsureScaleSetOutput{}, a.classify(in.Scope, callEnsureScaleSet, err, ans)
	}
	switch {
	case have == nil:
		created, err := c.CreateRunnerScaleSet(ctx, want)
		if err != nil {
			return workflows.EnsureScaleSetOutput{}, a.classify(in.Scope, callEnsureScaleSet, err, ans)
		}
		return workflows.EnsureScaleSetOutput{ScaleSetID: int64(created.ID), Created: true,
			NameOnlyLabels: keptOnlyItsName(created.Labels, in)}, nil
	case have.RunnerSetting.DisableUpdate && sameLabels(have.Labels, in.Labels):
		return workflows.EnsureScaleSetOutput{ScaleSetID: int64(have.ID)}, nil
	}
	updated, err := c.UpdateRunnerScaleSet(ctx, have.ID, want)
	if err != nil {
		return workflows.EnsureScaleSetOutput{}, a.classify(in.Scope, callEnsureScaleSet, err, ans)
	}
	return workflows.EnsureScaleSetOutput{ScaleSetID: int64(updated.ID), Updated: true,
		NameOnlyLabels: keptOnlyItsName(updated.Labels, in)}, nil
}

// keptOnlyItsName reports whether the set the service answered carries only its name as its
// label while the spec asks for others: GHES without custom scale-set labels drops them
// without an error (the client's README, "GitHub Enterprise Server").
func keptOnlyItsName(got []scaleset.Label, in workflows.EnsureScaleSetInput) bool {
	return len(got) == 1 && strings.EqualFold(got[0].Name, in.Name) && !sameLabels(got, in.Labels)
}

func scaleSetLabels(names []string) []scaleset.Label {
	out := make([]scaleset.Label, 0, len(names))
	for _, n := range names {
		out = append(out, scaleset.Label{Name: n})
	}
	return out
}

// sameLabels compares a set's labels with the spec's, as GitHub does: case-insensitively and
// in any order.
func sameLabels(have []scaleset.Label, want []string) bool {
	got := make([]string, 0, len(have))
	for _, l := range have {
		got = append(got, strings.ToLower(l.Name))
	}
	norm := make([]string, 0, len(want))
	for _, w := range want {
		norm = append(norm, strings.ToLower(w))
	}
	slices.Sort(got)
	slices.Sort(norm)
	return slices.Equal(got, norm)
}

// DeleteScaleSet deletes a set; one GitHub no longer has is deleted already.
func (a *ScaleSetActivities) DeleteScaleSet(ctx context.Context, in workflows.DeleteScaleSetInput) (workflows.DeleteScaleSetOutput, error) {
	ctx, ans, c, err := a.client(ctx, in.Scope)
	if err != nil {
		return workflows.DeleteScaleSetOutput{}, err
	}
	err = a.classify(in.Scope, callDeleteScaleSet, c.DeleteRunnerScaleSet(ctx, int(in.ScaleSetID)), ans)
	if isErrType(err, workflows.ErrScaleSetGone) {
		return workflows.DeleteScaleSetOutput{}, nil
	}
	return workflows.DeleteScaleSetOutput{Deleted: err == nil}, err
}

// RemoveScaleSetRunner removes a set's runner; the service refuses while its job runs
// (RunnerBusy, retried by ScaleSetRunnerRemovalPolicy). One already gone is removed. Without
// its id, the runner is looked up by name in its set: none there is removed already.
func (a *ScaleSetActivities) RemoveScaleSetRunner(ctx context.Context, in workflows.RemoveScaleSetRunnerInput) (workflows.RemoveScaleSetRunnerOutput, error) {
	ctx, ans, c, err := a.client(ctx, in.Scope)
	if err != nil {
		return workflows.RemoveScaleSetRunnerOutput{}, err
	}
	id := in.RunnerID
	if id == 0 {
		if id, err = a.scaleSetRunnerNamed(ctx, c, ans, in); err != nil || id == 0 {
			return workflows.RemoveScaleSetRunnerOutput{}, err
		}
	}
	err = a.classify(in.Scope, callScaleSetRunner, c.RemoveRunner(ctx, id), ans)
	if isErrType(err, workflows.ErrNotFound) {
		return workflows.RemoveScaleSetRunnerOutput{}, nil
	}
	return workflows.RemoveScaleSetRunnerOutput{Removed: err == nil}, err
}

// scaleSetRunnerNamed is the id of the set's runner named in.Name, 0 if the service has none
// there; a runner of that name in another set is not this workflow's, and is left alone.
func (a *ScaleSetActivities) scaleSetRunnerNamed(ctx context.Context, c *scaleset.Client, ans *answer, in workflows.RemoveScaleSetRunnerInput) (int64, error) {
	if in.Name == "" || in.ScaleSetID == 0 {
		return 0, temporal.NewNonRetryableApplicationError(
			"removing a scale-set runner takes its id, or its name and its set", workflows.ErrInvalidSpec, nil)
	}
	r, err := c.GetRunnerByName(ctx, in.Name)
	if err != nil {
		return 0, a.classify(in.Scope, callScaleSetRunner, err, ans)
	}
	if r == nil || int64(r.RunnerScaleSetID) != in.ScaleSetID {
		return 0, nil
	}
	return int64(r.ID), nil
}

// CreateScaleSetRunner mints a runner's JIT configuration from the set and writes it straight
// into the runner's Secret, in one activity, so the credential never passes through the
// workflow's history. Retried after a crash, it adopts the runner its Secret names if the
// service still has it; a name the service already holds (an earlier attempt's registration
// whose Secret was never written) is removed and minted again.
func (a *ScaleSetActivities) CreateScaleSetRunner(ctx context.Context, in workflows.CreateScaleSetRunnerInput) (workflows.CreateScaleSetRunnerOutput, error) {
	if in.Name == "" || in.Namespace == "" || in.WorkflowID == "" || in.ScaleSetID == 0 {
		return workflows.CreateScaleSetRunnerOutput{}, temporal.NewNonRetryableApplicationError(
			"a scale-set runner needs a name, a namespace, a workflow id and a scale set", workflows.ErrInvalidSpec, nil)
	}
	ctx, ans, c, err := a.client(ctx, in.Scope)
	if err != nil {
		return workflows.CreateScaleSetRunnerOutput{}, err
	}
	existing, err := ownedSecret(ctx, a.Kube, in.Namespace, in.Name, in.WorkflowID)
	if err != nil {
		return workflows.CreateScaleSetRunnerOutput{}, err
	}
	if out, ok, err := a.adoptScaleSetRunner(ctx, c, ans, in, existing); ok || err != nil {
		return out, err
	}
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: in.Name, WorkFolder: in.WorkFolder}, int(in.ScaleSetID))
	if errors.Is(err, scaleset.RunnerExistsError) {
		return workflows.CreateScaleSetRunnerOutput{}, a.clearScaleSetName(ctx, c, ans, in)
	}
	if err != nil {
		return workflows.CreateScaleSetRunnerOutput{}, a.classify(in.Scope, callScaleSetJIT, err, ans)
	}
	if jit.Runner == nil || jit.EncodedJITConfig == "" {
		return workflows.CreateScaleSetRunnerOutput{}, temporal.NewApplicationError("the service answered no runner or no configuration", workflows.ErrTransient)
	}
	secret := runnerSecret{
		namespace: in.Namespace, name: in.Name, pool: in.Pool, workflowID: in.WorkflowID,
		runnerID: int64(jit.Runner.ID), key: runnerpod.SecretKeyJITConfig, value: jit.EncodedJITConfig,
	}
	uid, err := applyRunnerSecret(ctx, a.Kube, existing, secret)
	if err != nil {
		// The runner exists without a Secret; the retry meets RunnerExists and clears it.
		return workflows.CreateScaleSetRunnerOutput{}, withoutSecret(err, jit.EncodedJITConfig)
	}
	return workflows.CreateScaleSetRunnerOutput{RunnerID: int64(jit.Runner.ID), SecretName: in.Name, SecretUID: uid}, nil
}

// adoptScaleSetRunner keeps the runner an earlier attempt wrote into our Secret, if the
// service still has it or the runner's pod may have used it (PodFirst).
func (a *ScaleSetActivities) adoptScaleSetRunner(ctx context.Context, c *scaleset.Client, ans *answer, in workflows.CreateScaleSetRunnerInput, existing *corev1.Secret) (workflows.CreateScaleSetRunnerOutput, bool, error) {
	if existing == nil || len(existing.Data[runnerpod.SecretKeyJITConfig]) == 0 {
		return workflows.CreateScaleSetRunnerOutput{}, false, nil
	}
	id, err := strconv.Atoi(existing.Annotations[runnerpod.AnnotationRunnerID])
	if err != nil || id == 0 {
		return workflows.CreateScaleSetRunnerOutput{}, false, nil
	}
	adopted := workflows.CreateScaleSetRunnerOutput{RunnerID: int64(id), SecretName: existing.Name, SecretUID: string(existing.UID), Adopted: true}
	if in.PodFirst {
		return adopted, true, nil // the pod may have used it already (RegisterRunner's PodFirst)
	}
	_, err = c.GetRunner(ctx, id)
	switch {
	case errors.Is(err, scaleset.RunnerNotFoundError):
		return workflows.CreateScaleSetRunnerOutput{}, false, nil // gone: mint another into the same Secret
	case err != nil:
		return workflows.CreateScaleSetRunnerOutput{}, false, a.classify(in.Scope, callScaleSetRunner, err, ans)
	}
	return adopted, true, nil
}

// clearScaleSetName handles "the name exists": a runner of that name in this set is a leftover
// of an earlier attempt (names are unique per workflow), removed before a retry; a busy one,
// or one of another set, is not ours.
func (a *ScaleSetActivities) clearScaleSetName(ctx context.Context, c *scaleset.Client, ans *answer, in workflows.CreateScaleSetRunnerInput) error {
	r, err := c.GetRunnerByName(ctx, in.Name)
	if err != nil {
		return a.classify(in.Scope, callScaleSetRunner, err, ans)
	}
	if r == nil {
		return temporal.NewApplicationError(fmt.Sprintf("the service reported the name %s taken but has no such runner; retrying", in.Name), workflows.ErrTransient)
	}
	if int64(r.RunnerScaleSetID) != in.ScaleSetID {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"a runner named %s (id %d) belongs to scale set %d, not this pool's %d", in.Name, r.ID, r.RunnerScaleSetID, in.ScaleSetID), workflows.ErrNotOwned, nil)
	}
	err = c.RemoveRunner(ctx, int64(r.ID))
	switch {
	case errors.Is(err, scaleset.JobStillRunningError):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"a runner named %s (id %d) is running a job and is not this workflow's registration", in.Name, r.ID), workflows.ErrNotOwned, nil)
	case err != nil && !errors.Is(err, scaleset.RunnerNotFoundError):
		return a.classify(in.Scope, callScaleSetRunner, err, ans)
	}
	return temporal.NewApplicationError(fmt.Sprintf(
		"removed runner %d left by an earlier attempt for %s; creating it again", r.ID, in.Name), workflows.ErrTransient)
}

// isErrType reports whether err is an application error of that type.
func isErrType(err error, typ string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == typ
}
