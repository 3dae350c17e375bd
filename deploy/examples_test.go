package deploy_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/internal/poolspec"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// The example pools parse with the same parser `starter apply` uses, and are what their
// comments say: an organization pool of ephemeral runners with a Docker sidecar, and a
// repository pool with a claim per slot, both in the namespace the worker's Role covers.
func TestExamplePoolsAreValid(t *testing.T) {
	pools, err := poolspec.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatalf("examples/pools.yaml: %v", err)
	}
	byName := map[string]workflows.PoolSpec{}
	for _, p := range pools {
		byName[p.Name] = p
		if p.Namespace != deploy.Namespace {
			t.Errorf("pool %s puts runners in %q; the worker's Role covers %q only", p.Name, p.Namespace, deploy.Namespace)
		}
	}
	org, ok := byName["org-docker"]
	if !ok || org.Organization == "" || !org.IsEphemeral() || org.Stateful() {
		t.Errorf("org-docker: want an ephemeral, stateless organization pool, got %+v", org)
	}
	if !slices.ContainsFunc(org.Template.Spec.InitContainers, isNativeSidecar) {
		t.Error("org-docker: want the Docker daemon as a native sidecar (init container with restartPolicy Always)")
	}
	repo, ok := byName["repo-cache"]
	if !ok || repo.Repository == "" || !repo.Stateful() {
		t.Errorf("repo-cache: want a stateful repository pool, got %+v", repo)
	}
	if len(pools) != 2 {
		t.Errorf("%d pools, want the two described", len(pools))
	}
}

func isNativeSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// The worker's real activities, acting as the worker's ServiceAccount, run a runner of each
// example pool through its Kubernetes lifecycle (registration writes the Secret; the pod is
// created, owns the Secret, is read and deleted): the pods built from the example templates
// are admitted, and the Role is enough for every Kubernetes call the activities make.
func TestWorkerRoleSufficesForTheActivitiesOnTheExamplePools(t *testing.T) {
	applyBase(t)
	pools, err := poolspec.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := serviceAccountClient(t, deploy.WorkerServiceAccount)
	acts := &activities.KubernetesActivities{Client: w}
	gh := startGitHub(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range pools {
		t.Run(p.Name, func(t *testing.T) {
			name := workflows.RunnerName(p.Name, "abcd", 1)
			_, err := gh.RegisterRunner(ctx, workflows.RegisterRunnerInput{
				Pool: p.Name, Name: name, WorkflowID: workflows.RunnerWorkflowID(p.Name, name), Namespace: p.Namespace,
				Scope: p.Scope(), Labels: p.Labels, RunnerGroup: p.RunnerGroup, Mode: workflows.RegistrationJIT,
			})
			if err != nil {
				t.Fatalf("RegisterRunner (mints the JIT configuration into the runner's Secret): %v", err)
			}
			in := workflows.CreateRunnerPodInput{
				Pool: p.Name, Name: name, WorkflowID: workflows.RunnerWorkflowID(p.Name, name), Namespace: p.Namespace,
				Template: p.Template, TemplateHash: p.TemplateHash(), SecretName: name, Mode: workflows.RegistrationJIT,
			}
			for _, c := range p.VolumeClaimTemplates {
				in.SlotVolumes = append(in.SlotVolumes, workflows.SlotVolume{VolumeName: c.Name, ClaimName: workflows.SlotClaimName(p.Name, c.Name, 0)})
			}
			created, err := acts.CreateRunnerPod(ctx, in)
			if err != nil {
				t.Fatalf("CreateRunnerPod: %v", err)
			}
			pod := workflows.PodRef{Namespace: p.Namespace, Name: name, UID: created.UID}
			steps := []struct {
				name string
				run  func() error
			}{
				{"SetRunnerSecretOwner", func() error {
					_, err := acts.SetRunnerSecretOwner(ctx, workflows.SetSecretOwnerInput{Namespace: p.Namespace, SecretName: name, PodName: name, PodUID: created.UID})
					return err
				}},
				{"GetRunnerPod", func() error {
					got, err := acts.GetRunnerPod(ctx, pod)
					if err == nil && !got.Exists {
						err = errors.New("the pod just created does not exist")
					}
					return err
				}},
				{"DeleteRunnerPod", func() error { _, err := acts.DeleteRunnerPod(ctx, pod); return err }},
				{"DeleteRunnerSecret", func() error {
					_, err := acts.DeleteRunnerSecret(ctx, workflows.SecretRef{Namespace: p.Namespace, Name: name})
					return err
				}},
			}
			for _, step := range steps {
				if err := step.run(); err != nil {
					t.Errorf("%s: %v", step.name, err)
				}
			}
		})
	}
}

// The stateful pool's claim templates are admitted when the worker's ServiceAccount creates
// them (server-side dry run: validated, authorized and admitted in full, not stored).
func TestExampleClaimTemplatesAreAdmittedForTheWorker(t *testing.T) {
	applyBase(t)
	pools, err := poolspec.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := serviceAccountClient(t, deploy.WorkerServiceAccount)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	claims := 0
	for _, p := range pools {
		for _, c := range p.VolumeClaimTemplates {
			claim := c.DeepCopy()
			claim.Name = workflows.SlotClaimName(p.Name, c.Name, 0)
			if _, err := w.CoreV1().PersistentVolumeClaims(p.Namespace).Create(ctx, claim, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("pool %s: claim template %s: %v", p.Name, c.Name, err)
			}
			claims++
		}
	}
	if claims == 0 {
		t.Error("no example pool has a claim template")
	}
}

const exampleToken = "ghp_deploytest000000000000000000000000000"

// startGitHub starts the GitHub double with the example pools' organization and repository,
// and returns the real GitHub activities pointed at it, writing Secrets through kube.
func startGitHub(t *testing.T, kube kubernetes.Interface) *activities.GitHubActivities {
	t.Helper()
	double, err := githubdouble.Start(githubdouble.Config{Tokens: []string{exampleToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(double.Close)
	for _, repo := range []string{"my-org/my-repo"} {
		if err := double.AddRepository(githubdouble.RepositorySpec{FullName: repo, OwnerType: "Organization"}); err != nil {
			t.Fatal(err)
		}
	}
	client, err := activities.NewGitHubClient(activities.GitHubConfig{BaseURL: double.URL(), Token: exampleToken})
	if err != nil {
		t.Fatal(err)
	}
	return &activities.GitHubActivities{GitHub: client, Kube: kube}
}
