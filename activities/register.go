package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// RegisterRunner is the one activity that touches both GitHub and Kubernetes, which is why it
// has this file of its own rather than living in github.go or kubernetes.go: the credential
// GitHub mints (JIT configuration or registration token) must exist only inside this activity
// and the Secret it is written to, so minting and storing cannot be two activities (the
// credential would pass through the workflow history between them). It runs on the GitHub
// task queue because its budgeted side effect is the GitHub call; the Secret write is the
// second half of the same effect. It returns only the runner id and the Secret's name.
//
// Asked to (RegisterRunnerInput.Pod), it then creates the runner's pod owned by that Secret:
// the pod is what the registration is for, and creating it here saves the workflow a round
// trip and an activity on a burst's path. The pod is create-or-adopt like the rest, so a retry
// after any step adopts what the earlier attempt made.
//
// Idempotence, for a retry after a crash at any point:
//   - our Secret exists and names a runner GitHub still has → adopt it (no new registration);
//   - GitHub answers 409 (the name exists) → the runner is looked up by name: offline and idle
//     means a leftover of our own earlier attempt (names are unique per workflow), which is
//     removed before a retryable error; online or busy means it is not ours → NotOwned;
//   - a Secret of the same name that another workflow owns is never touched → NotOwned.
func (a *GitHubActivities) RegisterRunner(ctx context.Context, in workflows.RegisterRunnerInput) (workflows.RegisterRunnerOutput, error) {
	if err := validateRegistration(in); err != nil {
		return workflows.RegisterRunnerOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	}
	if a.Kube == nil {
		// A worker that serves only named clusters polls the shared GitHub queue for reads and
		// removals; a default-cluster registration is not its to make.
		return workflows.RegisterRunnerOutput{}, temporal.NewApplicationError("this worker serves no default cluster", workflows.ErrClusterNotServed)
	}
	if in.Warm && in.Pod == nil && a.WarmNamespace != "" {
		// The Secret of a warm registration is kept out of the runner namespace; the rest of the
		// registration is the same, with the warm namespace in the Secret's place.
		in.Namespace = a.WarmNamespace
	}
	existing, err := ownedSecret(ctx, a.Kube, in.Namespace, in.Name, in.WorkflowID)
	if err != nil {
		return workflows.RegisterRunnerOutput{}, err
	}
	var pod *corev1.Pod
	if in.Pod != nil {
		// Built before any side effect, so a bad template costs no registration.
		planned := workflows.RegisterRunnerOutput{SecretName: in.Name, SecretUID: "pending"}
		if in.Mode == workflows.RegistrationToken {
			planned.RunnerURL = a.GitHub.RunnerURL(in.Scope)
		}
		if pod, err = buildRunnerPod(podOf(in, planned)); err != nil {
			return workflows.RegisterRunnerOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
		}
	}
	var out workflows.RegisterRunnerOutput
	switch adopted := false; {
	case in.Mode == workflows.RegistrationToken:
		out, err = a.registerWithToken(ctx, in, existing)
	default:
		if out, adopted, err = a.adoptRegistration(ctx, in, existing); err == nil && !adopted {
			out, err = a.registerJIT(ctx, in, existing)
		}
	}
	if in.Warm && err == nil {
		out.SecretNamespace = in.Namespace
	}
	if err != nil || pod == nil {
		return out, err
	}
	return a.startPod(ctx, in, out)
}

// startPod creates the runner's pod owned by the Secret just written. A pod of that name that
// belongs to someone else fails the activity for good; the error carries the registration
// (never the credential), so the workflow removes what it now owns.
func (a *GitHubActivities) startPod(ctx context.Context, in workflows.RegisterRunnerInput, out workflows.RegisterRunnerOutput) (workflows.RegisterRunnerOutput, error) {
	podIn := podOf(in, out)
	pod, err := buildRunnerPod(podIn)
	if err != nil {
		err = temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrInvalidSpec, nil)
	} else {
		var created workflows.CreateRunnerPodOutput
		if created, err = createRunnerPod(ctx, a.Kube, podIn, pod); err == nil {
			out.Pod = &created
			return out, nil
		}
		if _, full := quotaRefusal(err); full {
			// The namespace has no room for the pod now. The registration is done and stays in
			// its Secret; the pod is left to the workflow, which creates it when it gets no Pod
			// (CreateRunnerPod, on the Kubernetes queue, waits for room and tells the pool).
			// Retrying here would hold a slot of the paced GitHub queue and read GitHub on every
			// try, for a wait that may last as long as the jobs ahead.
			if activity.IsActivity(ctx) {
				activity.GetLogger(ctx).Info("No room for the runner's pod; the workflow creates it once there is",
					"pool", in.Pool, "runner", in.Name, "error", err)
			}
			return out, nil
		}
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() {
		return workflows.RegisterRunnerOutput{}, err // retried: the registration is adopted
	}
	return workflows.RegisterRunnerOutput{}, temporal.NewNonRetryableApplicationError(appErr.Message(), appErr.Type(), err, out)
}

// podOf is the pod input a registration asked for, owned by the registration's Secret.
func podOf(in workflows.RegisterRunnerInput, out workflows.RegisterRunnerOutput) workflows.CreateRunnerPodInput {
	p := *in.Pod
	p.SecretName, p.SecretUID = out.SecretName, out.SecretUID
	if out.RunnerURL != "" {
		p.RunnerURL = out.RunnerURL
	}
	return p
}

// adoptRegistration keeps the registration an earlier attempt of this activity wrote into our
// Secret, if GitHub still has that runner.
func (a *GitHubActivities) adoptRegistration(ctx context.Context, in workflows.RegisterRunnerInput, existing *corev1.Secret) (workflows.RegisterRunnerOutput, bool, error) {
	if existing == nil || len(existing.Data[runnerpod.SecretKeyJITConfig]) == 0 {
		return workflows.RegisterRunnerOutput{}, false, nil
	}
	id, err := strconv.ParseInt(existing.Annotations[runnerpod.AnnotationRunnerID], 10, 64)
	if err != nil || id == 0 {
		return workflows.RegisterRunnerOutput{}, false, nil
	}
	adopted := workflows.RegisterRunnerOutput{RunnerID: id, SecretName: existing.Name, SecretUID: string(existing.UID), Adopted: true}
	if in.PodFirst {
		// The pod was waiting for this Secret and may have run its job with it already: a
		// retry after an attempt whose result never reached the workflow (a Temporal restart)
		// must not mint a second registration that no pod ever uses.
		return adopted, true, nil
	}
	if in.Pod != nil {
		// An earlier attempt that got as far as the pod handed it this registration: the
		// registration is that pod's, whatever GitHub says of it now (GitHub removes an
		// ephemeral runner once its job is done, and the pod may have run one already).
		started, err := podOwnedBy(ctx, a.Kube, in.Namespace, in.Name, existing.UID)
		if err != nil || started {
			return adopted, started, err
		}
	}
	_, err = a.GitHub.GetRunner(ctx, in.Scope, id)
	switch {
	case isGitHubStatus(err, http.StatusNotFound):
		return workflows.RegisterRunnerOutput{}, false, nil // gone: mint a new one into the same Secret
	case err != nil:
		return workflows.RegisterRunnerOutput{}, false, classifyGitHubError(callGetRunner, err)
	}
	return adopted, true, nil
}

// podOwnedBy reports whether the runner's pod exists and is owned by the Secret with that UID.
func podOwnedBy(ctx context.Context, client kubernetes.Interface, namespace, name string, secretUID types.UID) (bool, error) {
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, classifyKubernetesError("get pod "+namespace+"/"+name, err)
	}
	return slices.ContainsFunc(pod.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == secretUID }), nil
}

func (a *GitHubActivities) registerJIT(ctx context.Context, in workflows.RegisterRunnerInput, existing *corev1.Secret) (workflows.RegisterRunnerOutput, error) {
	if err := a.secretHasRoom(ctx, in, existing, activityAttempt(ctx)); err != nil {
		return workflows.RegisterRunnerOutput{}, err
	}
	groupID, err := a.GitHub.RunnerGroupID(ctx, in.Scope, in.RunnerGroup)
	if err != nil {
		return workflows.RegisterRunnerOutput{}, classifyGitHubError(callRunnerGroup, err)
	}
	cfg, err := a.GitHub.CreateJITConfig(ctx, in.Scope, JITRequest{
		Name: in.Name, RunnerGroupID: groupID, Labels: in.Labels, WorkFolder: in.WorkFolder,
	})
	if isGitHubStatus(err, http.StatusConflict) {
		return workflows.RegisterRunnerOutput{}, a.clearNameClash(ctx, in)
	}
	if err != nil {
		return workflows.RegisterRunnerOutput{}, classifyGitHubError(callGenerateJIT, err)
	}
	secret := runnerSecret{
		namespace: in.Namespace, name: in.Name, pool: in.Pool, workflowID: in.WorkflowID,
		runnerID: cfg.Runner.ID, key: runnerpod.SecretKeyJITConfig, value: cfg.EncodedConfig,
	}
	uid, err := applyRunnerSecret(ctx, a.Kube, existing, secret)
	if err != nil {
		// The registration now exists without a Secret; the retry meets the 409 path above.
		return workflows.RegisterRunnerOutput{}, withoutSecret(err, cfg.EncodedConfig)
	}
	return workflows.RegisterRunnerOutput{RunnerID: cfg.Runner.ID, SecretName: in.Name, SecretUID: uid}, nil
}

// secretHasRoom asks the API server (a dry run) whether the runner's Secret would be admitted,
// before a retry mints a credential: a namespace whose ResourceQuota counts Secrets may refuse
// it, and a credential minted into a Secret that cannot be written is lost (the next try would
// remove its registration and mint again, on every try of a long wait). Only a retry with no
// Secret yet asks; a first attempt, the healthy path, makes no extra request.
func (a *GitHubActivities) secretHasRoom(ctx context.Context, in workflows.RegisterRunnerInput, existing *corev1.Secret, attempt int) error {
	if existing != nil || attempt <= 1 {
		return nil
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace}, Type: corev1.SecretTypeOpaque}
	_, err := a.Kube.CoreV1().Secrets(in.Namespace).Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil // AlreadyExists: created meanwhile; applyRunnerSecret checks its owner
	}
	return classifyKubernetesError("create secret "+in.Namespace+"/"+in.Name+" (dry run)", err)
}

// clearNameClash handles GitHub's 409 "A runner with the name ... already exists".
func (a *GitHubActivities) clearNameClash(ctx context.Context, in workflows.RegisterRunnerInput) error {
	runners, err := a.GitHub.ListRunners(ctx, in.Scope, in.Name)
	if err != nil {
		return classifyGitHubError(callListRunners, err)
	}
	for _, r := range runners {
		if !strings.EqualFold(r.Name, in.Name) {
			continue
		}
		if r.Online || r.Busy {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"a runner named %s (id %d) is online at GitHub in %s and is not this workflow's registration",
				in.Name, r.ID, in.Scope), workflows.ErrNotOwned, nil)
		}
		err := a.GitHub.RemoveRunner(ctx, in.Scope, r.ID)
		if err != nil && !isGitHubStatus(err, http.StatusNotFound) {
			return classifyGitHubError(callRemoveRunner, err)
		}
		return temporal.NewApplicationError(fmt.Sprintf(
			"removed offline registration %d left by an earlier attempt for %s; registering again", r.ID, in.Name),
			workflows.ErrTransient)
	}
	return temporal.NewApplicationError(fmt.Sprintf("GitHub reported the name %s taken but does not list it; retrying", in.Name),
		workflows.ErrTransient)
}

// registerWithToken writes a fresh registration token (they expire after an hour) into the
// Secret; the runner registers itself with it, so the runner id is learned later, by name.
func (a *GitHubActivities) registerWithToken(ctx context.Context, in workflows.RegisterRunnerInput, existing *corev1.Secret) (workflows.RegisterRunnerOutput, error) {
	if err := a.secretHasRoom(ctx, in, existing, activityAttempt(ctx)); err != nil {
		return workflows.RegisterRunnerOutput{}, err
	}
	token, err := a.GitHub.CreateRegistrationToken(ctx, in.Scope)
	if err != nil {
		return workflows.RegisterRunnerOutput{}, classifyGitHubError(callRegToken, err)
	}
	secret := runnerSecret{
		namespace: in.Namespace, name: in.Name, pool: in.Pool, workflowID: in.WorkflowID,
		key: runnerpod.SecretKeyRegistrationToken, value: token,
	}
	uid, err := applyRunnerSecret(ctx, a.Kube, existing, secret)
	if err != nil {
		return workflows.RegisterRunnerOutput{}, withoutSecret(err, token)
	}
	return workflows.RegisterRunnerOutput{SecretName: in.Name, SecretUID: uid, RunnerURL: a.GitHub.RunnerURL(in.Scope)}, nil
}

func validateRegistration(in workflows.RegisterRunnerInput) error {
	var problems []string
	if in.Name == "" || in.Namespace == "" || in.WorkflowID == "" {
		problems = append(problems, "name, namespace and workflow id are required")
	}
	if err := in.Scope.Validate(); err != nil {
		problems = append(problems, "scope: "+err.Error())
	}
	switch in.Mode {
	case workflows.RegistrationJIT:
		if len(in.Labels) == 0 {
			problems = append(problems, "a JIT runner needs at least one label")
		}
	case workflows.RegistrationToken:
	default:
		problems = append(problems, fmt.Sprintf("unknown registration mode %q", in.Mode))
	}
	if len(problems) > 0 {
		return errors.New("invalid registration: " + strings.Join(problems, "; "))
	}
	return nil
}

// withoutSecret makes sure an error that may quote a request body never carries the credential
// into the workflow history; the error keeps its type and retry behaviour.
func withoutSecret(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return temporal.NewApplicationErrorWithOptions(strings.ReplaceAll(app.Message(), secret, "[redacted]"), app.Type(),
			temporal.ApplicationErrorOptions{NonRetryable: app.NonRetryable(), NextRetryDelay: app.NextRetryDelay(), Category: app.Category()})
	}
	return temporal.NewApplicationError(strings.ReplaceAll(err.Error(), secret, "[redacted]"), workflows.ErrTransient)
}
