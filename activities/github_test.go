package activities

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

func TestGitHubClientAsAppInstallation(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh, err := githubdouble.Start(githubdouble.Config{App: &githubdouble.AppConfig{ID: 11, InstallationID: 22, PublicKey: &key.PublicKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(keyFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), AppID: 11, InstallationID: 22, PrivateKeyPath: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.CreateJITConfig(context.Background(), workflows.Scope{Organization: "acme"},
		JITRequest{Name: "r1", RunnerGroupID: 1, Labels: []string{"linux"}})
	if err != nil || cfg.Runner.ID == 0 {
		t.Fatalf("JIT config as an App installation: %+v, %v", cfg.Runner, err)
	}
	wrongInstallation, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), AppID: 11, InstallationID: 99, PrivateKeyPEM: pemBytes})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrongInstallation.ListRunners(context.Background(), workflows.Scope{Organization: "acme"}, "")
	classified := classifyGitHubError(callListRunners, err)
	if err == nil || strings.Contains(classified.Error(), string(pemBytes[40:80])) {
		t.Errorf("unknown installation: %v", classified)
	}
}

func TestNewGitHubClientRejectsBadConfig(t *testing.T) {
	for want, cfg := range map[string]GitHubConfig{
		"no credentials":       {},
		"not both":             {Token: "ghp_secret_value", AppID: 1},
		"installation id":      {AppID: 1, PrivateKeyPEM: []byte("x")},
		"private key":          {AppID: 1, InstallationID: 2},
		"not an absolute URL":  {BaseURL: "ghe.example.com", Token: "ghp_secret_value"},
		"App private key":      {AppID: 1, InstallationID: 2, PrivateKeyPEM: []byte("not a key")},
		"read App private key": {AppID: 1, InstallationID: 2, PrivateKeyPath: "/nonexistent/key.pem"},
	} {
		_, err := NewGitHubClient(cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %+v: error %v, want it to mention %q", cfg, err, want)
		}
		if err != nil && cfg.Token != "" && strings.Contains(err.Error(), cfg.Token) {
			t.Errorf("error echoes the token: %v", err)
		}
	}
}

func TestRunnerURLs(t *testing.T) {
	for api, want := range map[string]string{
		"https://api.github.com/":         "https://github.com/acme",
		"https://ghe.example.com/api/v3/": "https://ghe.example.com/acme",
		"http://127.0.0.1:8080/":          "http://127.0.0.1:8080/acme",
	} {
		u, _ := url.Parse(api)
		c := &GitHubClient{webBase: webBase(u)}
		if got := c.RunnerURL(workflows.Scope{Organization: "acme"}); got != want {
			t.Errorf("%s: runner URL %s, want %s", api, got, want)
		}
	}
	c := &GitHubClient{webBase: "https://github.com/"}
	if got := c.RunnerURL(workflows.Scope{Enterprise: "big"}); got != "https://github.com/enterprises/big" {
		t.Errorf("enterprise URL %s", got)
	}
	if got := c.RunnerURL(workflows.Scope{Repository: "acme/app"}); got != "https://github.com/acme/app" {
		t.Errorf("repository URL %s", got)
	}
}

// TestEnterpriseRunnersRefusedToAnAppSayWhichCredentialToUse: GitHub's enterprise runner endpoints
// refuse App installation tokens (403 "Resource not accessible by integration", as the double
// answers); RegisterRunner, in both modes, and the pool's listing fail for good with an error
// that says a classic token with manage_runners:enterprise is needed, and nothing is written. The
// same calls with a classic token succeed.
func TestEnterpriseRunnersRefusedToAnAppSayWhichCredentialToUse(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh, err := githubdouble.Start(githubdouble.Config{
		Tokens: []string{testToken},
		App:    &githubdouble.AppConfig{ID: 11, InstallationID: 22, PublicKey: &key.PublicKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app", Enterprise: "big"}); err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	app, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), AppID: 11, InstallationID: 22, PrivateKeyPEM: pemBytes})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	enterprise := workflows.Scope{Enterprise: "big"}
	asApp := &GitHubActivities{GitHub: app, Kube: e.kube}
	for _, mode := range []workflows.RegistrationMode{workflows.RegistrationJIT, workflows.RegistrationToken} {
		in := e.registration("pool-a-ent-" + string(mode))
		in.Scope, in.Mode = enterprise, mode
		_, err := asApp.RegisterRunner(e.ctx, in)
		checkEnterpriseRefusal(t, string(mode)+" registration", err)
		if _, err := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("%s registration refused by GitHub left a Secret", mode)
		}
	}
	_, err = asApp.ListRunners(e.ctx, workflows.ListRunnersInput{Scope: enterprise, NamePrefix: "pool-a-"})
	checkEnterpriseRefusal(t, "listing", err)
	if _, err := asApp.RegisterRunner(e.ctx, e.registration("pool-a-org")); err != nil {
		t.Errorf("the App cannot register an organization runner: %v", err)
	}

	token, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	asToken := &GitHubActivities{GitHub: token, Kube: e.kube}
	in := e.registration("pool-a-ent-pat")
	in.Scope = enterprise
	if out, err := asToken.RegisterRunner(e.ctx, in); err != nil || out.RunnerID == 0 {
		t.Errorf("a classic token registering an enterprise runner: %+v, %v", out, err)
	}
}

func checkEnterpriseRefusal(t *testing.T, what string, err error) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrForbidden || !app.NonRetryable() {
		t.Fatalf("%s as an App in an enterprise: %v, want a non-retryable %s error", what, err, workflows.ErrForbidden)
	}
	for _, want := range []string{EnterpriseCredentialHint, "GitHub App installation", "403"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not say %q", what, err, want)
		}
	}
}

// A read that fails partway (here the hour's budget runs out after two of three jobs) is an
// error the policy retries, never the jobs read so far passed off as the whole answer: the pool
// accounts for runners that ended unnamed by the jobs it read.
func TestReadJobsPartwayFailureIsAnError(t *testing.T) {
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{"t0k"}, RateLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	var refs []workflows.JobRef
	for range 3 {
		j, err := gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, workflows.JobRef{ID: j.ID, Repository: "acme/app"})
	}
	c, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	a := &GitHubActivities{GitHub: c}
	out, err := a.ReadJobs(context.Background(), workflows.ReadJobsInput{Pool: "p", Jobs: refs})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrRateLimited || app.NonRetryable() || len(out.Jobs) != 0 {
		t.Fatalf("ReadJobs with the budget spent after two reads = %+v, %v; want no jobs and a retryable %s error", out, err, workflows.ErrRateLimited)
	}
}

// A job whose repository this credential can never read is listed unread, and the other jobs
// are still read; with nothing readable, the refusal is the error.
func TestReadJobsListsJobsItCannotRead(t *testing.T) {
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{"t0k"}})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	queued, err := gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	a := &GitHubActivities{GitHub: c}
	out, err := a.ReadJobs(context.Background(), workflows.ReadJobsInput{Pool: "p", Jobs: []workflows.JobRef{
		{ID: 7, Repository: "not-a-repository"}, {ID: queued.ID, Repository: "acme/app"},
	}})
	if err != nil || !slices.Equal(out.Jobs, []workflows.JobReading{{ID: queued.ID, Status: workflows.JobQueued}}) || !slices.Equal(out.Unread, []int64{7}) {
		t.Errorf("ReadJobs = %+v, %v; want job %d read and job 7 unread", out, err, queued.ID)
	}
	_, err = a.ReadJobs(context.Background(), workflows.ReadJobsInput{Pool: "p", Jobs: []workflows.JobRef{{ID: 7, Repository: "not-a-repository"}}})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrInvalidSpec {
		t.Errorf("ReadJobs of an unreadable job alone = %v, want the %s refusal", err, workflows.ErrInvalidSpec)
	}
}

// ReadJobs reads each job at GitHub: a cancelled job is completed, a queued one queued, one
// GitHub does not know is gone; the GETs go through the real client.
func TestReadJobsReadsEachJobAtGitHub(t *testing.T) {
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{"t0k"}})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	queued, err := gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"linux"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := gh.CancelJob(cancelled.ID); err != nil {
		t.Fatal(err)
	}
	c, err := NewGitHubClient(GitHubConfig{BaseURL: gh.URL(), Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	a := &GitHubActivities{GitHub: c}
	out, err := a.ReadJobs(context.Background(), workflows.ReadJobsInput{Pool: "p", Jobs: []workflows.JobRef{
		{ID: queued.ID, Repository: "acme/app"}, {ID: cancelled.ID, Repository: "acme/app"}, {ID: 999999, Repository: "acme/app"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []workflows.JobReading{
		{ID: queued.ID, Status: workflows.JobQueued},
		{ID: cancelled.ID, Status: workflows.JobCompleted, Conclusion: "cancelled"},
		{ID: 999999, Gone: true},
	}
	if !slices.Equal(out.Jobs, want) {
		t.Errorf("ReadJobs = %+v, want %+v", out.Jobs, want)
	}
}
