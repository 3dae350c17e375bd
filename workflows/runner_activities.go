package workflows

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"go.temporal.io/sdk/workflow"
)

// Activity names of the runner lifecycle. Activities are registered under these names, so a
// renamed Go method never breaks a running history. Each has one external side effect and is
// idempotent (create-or-adopt; delete where NotFound is success).
const (
	// ActivityRegisterRunner asks GitHub for a JIT configuration (or a registration token) and
	// writes it into the runner's Secret in the same activity: the credential never reaches
	// the workflow history. Runs on GitHubTaskQueue.
	ActivityRegisterRunner = "RegisterRunner"
	// ActivityGetRunner reads one runner's GitHub status (by id, or by name while the id is
	// unknown). Runs on GitHubTaskQueue; used only at the registration timeout.
	ActivityGetRunner = "GetRunner"
	// ActivityRemoveRunner removes a runner's GitHub registration; 404 is success, 422 is
	// RunnerBusy. Runs on GitHubTaskQueue.
	ActivityRemoveRunner = "RemoveRunner"
	// ActivityCreateRunnerPod creates (or adopts) the runner's pod.
	ActivityCreateRunnerPod = "CreateRunnerPod"
	// ActivitySetSecretOwner makes the pod the owner of the runner's Secret, so a cluster's
	// garbage collector removes the Secret with the pod.
	ActivitySetSecretOwner = "SetRunnerSecretOwner"
	// ActivityGetRunnerPod reads the pod's phase: the backstop for a missed pod-watcher signal.
	ActivityGetRunnerPod = "GetRunnerPod"
	// ActivityDeleteRunnerPod deletes the runner's pod; NotFound is success.
	ActivityDeleteRunnerPod = "DeleteRunnerPod"
	// ActivityDeleteRunnerSecret deletes the runner's Secret; NotFound is success.
	ActivityDeleteRunnerSecret = "DeleteRunnerSecret"
	// ActivityStartWarmRunner starts a runner that took a warm registration kept apart from
	// its namespace: it writes the runner's own Secret from the warm one and creates the pod
	// owned by it, so the credential reaches the runner's namespace only when its runner
	// starts.
	ActivityStartWarmRunner = "StartWarmRunner"
	// ActivityCopyWarmSecret writes a runner's own Secret in its namespace from its warm
	// registration's (its pod exists and is scheduled: changeSecretAfterScheduling).
	ActivityCopyWarmSecret = "CopyWarmRunnerSecret"
	// ActivityDeleteWarmSecrets deletes warm registrations' Secrets whose runners took copies,
	// many in one request (a DeleteCollection by their names); none left is success.
	ActivityDeleteWarmSecrets = "DeleteWarmSecrets"
)

// RegisterRunnerInput asks for one runner's registration.
type RegisterRunnerInput struct {
	// Cluster is the named cluster the runner lives in; empty is the default cluster.
	Cluster string `json:"cluster,omitempty"`
	Pool    string `json:"pool"`
	// Name is the runner name at GitHub and the Secret's name.
	Name string `json:"name"`
	// WorkflowID is the owner written on the Secret; a Secret of the same name with another
	// owner is never adopted.
	WorkflowID  string           `json:"workflowId"`
	Namespace   string           `json:"namespace"`
	Scope       Scope            `json:"scope"`
	Labels      []string         `json:"labels"`
	RunnerGroup string           `json:"runnerGroup,omitempty"`
	Mode        RegistrationMode `json:"mode"`
	WorkFolder  string           `json:"workFolder,omitempty"`
	// Pod, when set, is the runner's pod, created by the same activity once the credential is
	// stored, owned by the Secret (the activity fills in SecretName and SecretUID): the pod
	// follows the registration without a round trip through the workflow. Workers before this
	// field ignore it and return no Pod; the workflow then creates the pod itself.
	Pod *CreateRunnerPodInput `json:"pod,omitempty"`
	// Warm marks a warm registration: the worker writes its Secret into its warm namespace
	// (kept apart from every runner's pod) rather than into Namespace, and says which in
	// RegisterRunnerOutput.SecretNamespace. Workers before this field write into Namespace.
	Warm bool `json:"warm,omitempty"`
	// PodFirst: the runner's pod exists already, created before its Secret
	// (changeSecretAfterScheduling), and its kubelet reads the Secret as soon as it is written.
	// A registration an earlier attempt wrote into the Secret is then that pod's whatever GitHub
	// says of it now (an ephemeral runner's is removed once it ran its job): it is adopted,
	// never minted again beside the one the pod used.
	PodFirst bool `json:"podFirst,omitempty"`
}

// RegisterRunnerOutput names what the registration created; never the credential itself.
type RegisterRunnerOutput struct {
	// RunnerID is GitHub's id of the runner; 0 in registration-token mode, where the runner
	// registers itself and the id is learned later by name.
	RunnerID int64 `json:"runnerId,omitempty"`
	// SecretName is the Secret holding the JIT configuration or registration token.
	SecretName string `json:"secretName"`
	// SecretUID is the Secret's UID: the runner's pod names the Secret as its owner, so deleting
	// the Secret takes the pod with it. Empty from workers before that change.
	SecretUID string `json:"secretUid,omitempty"`
	// RunnerURL is the web URL a runner in registration-token mode configures itself against.
	RunnerURL string `json:"runnerUrl,omitempty"`
	// Adopted is true when a previous attempt's registration was found and kept.
	Adopted bool `json:"adopted,omitempty"`
	// Pod is the pod created (or adopted) when the input asked for it.
	Pod *CreateRunnerPodOutput `json:"pod,omitempty"`
	// SecretNamespace is the namespace the Secret was written to: set for a warm registration
	// (the worker's warm namespace, which may be the runner's own); empty means the input's
	// Namespace.
	SecretNamespace string `json:"secretNamespace,omitempty"`
}

// apart reports whether the registration's Secret is kept outside the runner's namespace ns:
// its runner then starts from a copy of it (StartWarmRunner).
func (o RegisterRunnerOutput) apart(ns string) bool {
	return o.SecretNamespace != "" && o.SecretNamespace != ns
}

// RunnerRef names a runner at GitHub, for GetRunner and RemoveRunner.
type RunnerRef struct {
	Scope Scope `json:"scope"`
	// RunnerID is preferred; when 0 the runner is looked up by Name.
	RunnerID int64  `json:"runnerId,omitempty"`
	Name     string `json:"name"`
}

// GetRunnerOutput is a runner's GitHub status.
type GetRunnerOutput struct {
	// Found is false when GitHub does not know the runner.
	Found    bool  `json:"found"`
	RunnerID int64 `json:"runnerId,omitempty"`
	Online   bool  `json:"online"`
	Busy     bool  `json:"busy"`
}

// RemoveRunnerOutput says whether a registration was removed or was already gone.
type RemoveRunnerOutput struct {
	// Removed is false when GitHub no longer knew the runner (404), which counts as success.
	Removed bool `json:"removed"`
}

// CreateRunnerPodInput describes the pod of one runner.
type CreateRunnerPodInput struct {
	// Cluster is the named cluster the runner lives in; empty is the default cluster.
	Cluster    string `json:"cluster,omitempty"`
	Pool       string `json:"pool"`
	Name       string `json:"name"`
	WorkflowID string `json:"workflowId"`
	Namespace  string `json:"namespace"`
	// Template is the pool's pod template; it must have a container named "runner".
	Template     corev1.PodTemplateSpec `json:"template"`
	TemplateHash string                 `json:"templateHash"`
	SecretName   string                 `json:"secretName"`
	// SecretUID, when set, makes the Secret the pod's owner: the cluster's garbage collector
	// deletes the pod when the runner's Secret is deleted (one write ends a runner).
	SecretUID   string           `json:"secretUid,omitempty"`
	Mode        RegistrationMode `json:"mode"`
	SlotVolumes []SlotVolume     `json:"slotVolumes,omitempty"`
	// The fields below configure a runner in registration-token mode (ignored in JIT mode,
	// where the JIT configuration carries them).
	RunnerURL   string   `json:"runnerUrl,omitempty"`
	Labels      []string `json:"labels,omitempty"`
	RunnerGroup string   `json:"runnerGroup,omitempty"`
	Ephemeral   bool     `json:"ephemeral,omitempty"`
	WorkFolder  string   `json:"workFolder,omitempty"`
	// SecretAfterScheduling marks a pod created before its Secret
	// (runnerpod.AnnotationSecretAfterScheduling): the pod watcher then reports its scheduling
	// and its start too. SecretUID is empty for such a pod: it outlives its Secret.
	SecretAfterScheduling bool `json:"secretAfterScheduling,omitempty"`
}

// CreateRunnerPodOutput identifies the created (or adopted) pod.
type CreateRunnerPodOutput struct {
	UID     string `json:"uid"`
	Adopted bool   `json:"adopted,omitempty"`
	// CreatedAt is when the pod was created (the activity's clock; an adopted pod's creation
	// timestamp), for the scale-up latency metric; zero from older workers.
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// SetSecretOwnerInput makes a pod the owner of a runner's Secret.
type SetSecretOwnerInput struct {
	// Cluster is the named cluster the runner lives in; empty is the default cluster.
	Cluster    string `json:"cluster,omitempty"`
	Namespace  string `json:"namespace"`
	SecretName string `json:"secretName"`
	PodName    string `json:"podName"`
	PodUID     string `json:"podUid"`
}

// PodRef names one runner pod. UID, when set, pins the pod: a different pod that took the name
// is not ours (reads report it gone, deletes leave it alone).
type PodRef struct {
	// Cluster is the named cluster the runner lives in; empty is the default cluster.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// GetRunnerPodOutput is a pod's state as the runner workflow needs it.
type GetRunnerPodOutput struct {
	// Exists is false when the pod (with the given UID) is gone.
	Exists   bool     `json:"exists"`
	Phase    PodPhase `json:"phase,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Deleting bool     `json:"deleting,omitempty"`
	// Scheduled is true once the pod is bound to a node; false from workers before it.
	Scheduled bool `json:"scheduled,omitempty"`
}

// SecretRef names one runner Secret.
type SecretRef struct {
	// Cluster is the named cluster the runner lives in; empty is the default cluster.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// StartWarmRunnerInput starts a runner from a warm registration kept in another namespace.
type StartWarmRunnerInput struct {
	// Pod is the runner's pod; its Secret is written under Pod.Name in Pod.Namespace, with the
	// warm Secret's credential, and owns the pod.
	Pod CreateRunnerPodInput `json:"pod"`
	// Warm is the warm registration's Secret; it must name Pod.WorkflowID as its owner.
	Warm SecretRef `json:"warm"`
}

// StartWarmRunnerOutput names the runner's own Secret and its pod.
type StartWarmRunnerOutput struct {
	SecretName string                `json:"secretName"`
	SecretUID  string                `json:"secretUid"`
	Pod        CreateRunnerPodOutput `json:"pod"`
}

// CopyWarmSecretInput writes one runner's Secret from its warm registration's.
type CopyWarmSecretInput struct {
	// Secret is the runner's own Secret to write (its name is the runner's).
	Secret     SecretRef `json:"secret"`
	Pool       string    `json:"pool"`
	WorkflowID string    `json:"workflowId"`
	// Warm is the warm registration's Secret; it must name WorkflowID as its owner.
	Warm SecretRef `json:"warm"`
}

// CopyWarmSecretOutput names the runner's own Secret; never the credential.
type CopyWarmSecretOutput struct {
	SecretName string `json:"secretName"`
	SecretUID  string `json:"secretUid"`
}

// DeleteWarmSecretsInput names warm registrations' Secrets in one namespace, all of one pool.
type DeleteWarmSecretsInput struct {
	Namespace string   `json:"namespace"`
	Pool      string   `json:"pool"`
	Names     []string `json:"names"`
}

// Nothing is the output of activities that have nothing to report; one struct rather than no
// result, so a field can be added later without changing the signature.
type Nothing struct{}

// runActivity runs one activity under a policy and decodes its result: the one place the
// typed helpers below share.
func runActivity[I, O any](ctx workflow.Context, policy workflow.ActivityOptions, name string, in I) (O, error) {
	var out O
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, policy), name, in).Get(ctx, &out)
	return out, err
}

func registerRunner(ctx workflow.Context, in RegisterRunnerInput) (RegisterRunnerOutput, error) {
	return runActivity[RegisterRunnerInput, RegisterRunnerOutput](ctx, ForCluster(GitHubActivityPolicy, in.Cluster), ActivityRegisterRunner, in)
}

func getRunner(ctx workflow.Context, in RunnerRef) (GetRunnerOutput, error) {
	return runActivity[RunnerRef, GetRunnerOutput](ctx, GitHubActivityPolicy, ActivityGetRunner, in)
}

// checkRunnerAtGitHub is GetRunner under RegistrationCheckPolicy: the registration check asks
// again later rather than waiting hours on one read.
func checkRunnerAtGitHub(ctx workflow.Context, in RunnerRef) (GetRunnerOutput, error) {
	return runActivity[RunnerRef, GetRunnerOutput](ctx, RegistrationCheckPolicy, ActivityGetRunner, in)
}

func removeRunner(ctx workflow.Context, in RunnerRef) (RemoveRunnerOutput, error) {
	return runActivity[RunnerRef, RemoveRunnerOutput](ctx, UnregisterBusyPolicy, ActivityRemoveRunner, in)
}

// removeForcedRunner is RemoveRunner for a force-removed runner, whose pod is already gone:
// GitHub says busy only until it notices, so the 422 is retried briefly (ForceUnregisterPolicy).
func removeForcedRunner(ctx workflow.Context, in RunnerRef) (RemoveRunnerOutput, error) {
	return runActivity[RunnerRef, RemoveRunnerOutput](ctx, ForceUnregisterPolicy, ActivityRemoveRunner, in)
}

func createRunnerPod(ctx workflow.Context, in CreateRunnerPodInput) (CreateRunnerPodOutput, error) {
	return runActivity[CreateRunnerPodInput, CreateRunnerPodOutput](ctx, ForCluster(KubernetesActivityPolicy, in.Cluster), ActivityCreateRunnerPod, in)
}

func setSecretOwner(ctx workflow.Context, in SetSecretOwnerInput) (Nothing, error) {
	return runActivity[SetSecretOwnerInput, Nothing](ctx, ForCluster(KubernetesActivityPolicy, in.Cluster), ActivitySetSecretOwner, in)
}

func getRunnerPod(ctx workflow.Context, in PodRef) (GetRunnerPodOutput, error) {
	return runActivity[PodRef, GetRunnerPodOutput](ctx, ForCluster(PodCheckPolicy, in.Cluster), ActivityGetRunnerPod, in)
}

func deleteRunnerPod(ctx workflow.Context, in PodRef) (Nothing, error) {
	return runActivity[PodRef, Nothing](ctx, ForCluster(KubernetesActivityPolicy, in.Cluster), ActivityDeleteRunnerPod, in)
}

func deleteRunnerSecret(ctx workflow.Context, in SecretRef) (Nothing, error) {
	return runActivity[SecretRef, Nothing](ctx, ForCluster(KubernetesActivityPolicy, in.Cluster), ActivityDeleteRunnerSecret, in)
}

func startWarmRunner(ctx workflow.Context, in StartWarmRunnerInput) (StartWarmRunnerOutput, error) {
	return runActivity[StartWarmRunnerInput, StartWarmRunnerOutput](ctx, ForCluster(KubernetesActivityPolicy, in.Pod.Cluster), ActivityStartWarmRunner, in)
}

func copyWarmSecret(ctx workflow.Context, in CopyWarmSecretInput) (CopyWarmSecretOutput, error) {
	return runActivity[CopyWarmSecretInput, CopyWarmSecretOutput](ctx, ForCluster(CredentialStepPolicy, in.Secret.Cluster), ActivityCopyWarmSecret, in)
}

// registerIntoWaitingPod is RegisterRunner for a pod created first (changeSecretAfterScheduling).
func registerIntoWaitingPod(ctx workflow.Context, in RegisterRunnerInput) (RegisterRunnerOutput, error) {
	return runActivity[RegisterRunnerInput, RegisterRunnerOutput](ctx, ForCluster(CredentialRegistrationPolicy, in.Cluster), ActivityRegisterRunner, in)
}

// retireRunnerSecret deletes the Secret of a runner that started (changeSecretAfterScheduling).
func retireRunnerSecret(ctx workflow.Context, in SecretRef) (Nothing, error) {
	return runActivity[SecretRef, Nothing](ctx, ForCluster(CredentialStepPolicy, in.Cluster), ActivityDeleteRunnerSecret, in)
}

func deleteWarmSecrets(ctx workflow.Context, in DeleteWarmSecretsInput) (Nothing, error) {
	return runActivity[DeleteWarmSecretsInput, Nothing](ctx, WarmSecretsPolicy, ActivityDeleteWarmSecrets, in)
}
