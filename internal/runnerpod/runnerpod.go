// Package runnerpod names the labels, annotations, secret keys and environment variables that
// connect a runner pod to its workflow, its secret and the runner process inside it. Activities
// write them; the pod watcher and the test world's runner simulator read them.
package runnerpod

const (
	// LabelManagedBy marks every object runnerflow creates, so one label selector finds them all.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on runnerflow's objects.
	ManagedByValue = "runnerflow"
	// LabelPool carries the pool name.
	LabelPool = "runnerflow.dev/pool"
	// LabelRunner carries the runner name (also the pod, secret and GitHub runner name).
	LabelRunner = "runnerflow.dev/runner"
	// AnnotationTemplateHash carries the hash of the pod template the pod was made from, so a
	// rollout can tell outdated runners from current ones.
	AnnotationTemplateHash = "runnerflow.dev/template-hash"
	// AnnotationWorkflowID carries the id of the runner workflow that owns the pod.
	AnnotationWorkflowID = "runnerflow.dev/workflow-id"
	// AnnotationRunnerID carries, on a runner's Secret, the GitHub runner id its JIT
	// configuration belongs to, so a retried registration can adopt it instead of minting another.
	AnnotationRunnerID = "runnerflow.dev/runner-id"

	// AnnotationSecretAfterScheduling marks a pod created before its runner's Secret: the
	// Secret is written once the pod is scheduled and deleted once the runner has started, so
	// the pod watcher reports this pod's scheduling and its start, not only its end.
	AnnotationSecretAfterScheduling = "runnerflow.dev/secret-after-scheduling"

	// RunnerContainerName is the container that runs the GitHub Actions runner.
	RunnerContainerName = "runner"

	// SecretKeyJITConfig holds the encoded just-in-time runner configuration (JIT mode).
	SecretKeyJITConfig = "jitconfig"
	// SecretKeyRegistrationToken holds the registration token (registration-token mode, used for
	// persistent runners and GitHub Enterprise Server versions without JIT).
	SecretKeyRegistrationToken = "token"

	// EnvJITConfig is how the actions runner image receives its JIT configuration.
	EnvJITConfig = "ACTIONS_RUNNER_INPUT_JITCONFIG"
	// EnvRegistrationToken, EnvRunnerName, EnvRunnerLabels, EnvRunnerGroup, EnvRunnerEphemeral,
	// EnvRunnerURL and EnvRunnerWorkDir configure a runner in registration-token mode.
	EnvRegistrationToken = "RUNNER_TOKEN"
	EnvRunnerName        = "RUNNER_NAME"
	EnvRunnerLabels      = "RUNNER_LABELS"
	EnvRunnerGroup       = "RUNNER_GROUP"
	EnvRunnerEphemeral   = "RUNNER_EPHEMERAL"
	EnvRunnerURL         = "RUNNER_URL"
	EnvRunnerWorkDir     = "RUNNER_WORKDIR"
)
