package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// The activities are tested against a real kube-apiserver (one for the package, a namespace
// per test) and the GitHub double through the real go-github client.
var testKube *testworld.Kube

func TestMain(m *testing.M) {
	os.Exit(runWithKube(m))
}

func runWithKube(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runnerflow-activities-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if testKube, err = testworld.StartKube(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "start kube-apiserver:", err)
		return 1
	}
	defer testKube.Stop()
	return m.Run()
}

const testToken = "ghp_activities_test_token"

// env is one test's world: a namespace, a fresh GitHub double with organization acme and
// repository acme/app, and the activities wired to both.
type env struct {
	t    *testing.T
	ctx  context.Context
	ns   string
	kube kubernetes.Interface
	gh   *githubdouble.Server
	api  *GitHubClient
	gha  *GitHubActivities
	k8s  *KubernetesActivities
}

func newEnv(t *testing.T) *env {
	t.Helper()
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{testToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	api, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(testKube.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &env{
		t: t, ctx: ctx, ns: testKube.NewNamespace(t), kube: kube, gh: gh, api: api,
		gha: &GitHubActivities{GitHub: api, Kube: kube},
		k8s: &KubernetesActivities{Client: kube},
	}
}

var acme = workflows.Scope{Organization: "acme"}

func (e *env) registration(name string) workflows.RegisterRunnerInput {
	return workflows.RegisterRunnerInput{
		Pool: "pool-a", Name: name, WorkflowID: workflows.RunnerWorkflowID("pool-a", name), Namespace: e.ns,
		Scope: acme, Labels: []string{"self-hosted", "linux"}, Mode: workflows.RegistrationJIT,
	}
}

// errType is the application error type of err ("" if none).
func errType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

// mustNotLeak fails if any credential the double issued appears in s.
func (e *env) mustNotLeak(what, s string) {
	e.t.Helper()
	for _, secret := range e.gh.IssuedSecrets() {
		if secret != "" && strings.Contains(s, secret) {
			e.t.Errorf("%s carries a credential", what)
		}
	}
}
