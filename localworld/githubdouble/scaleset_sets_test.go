package githubdouble

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
)

func TestScaleSetClientOpensTheActionsServiceWithOneRegistrationToken(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	createSet(t, c, "linux-set")
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "linux-set"); err != nil {
		t.Fatalf("GetRunnerScaleSet: %v", err)
	}
	calls := w.Calls()
	want := map[CallKey]int{
		{Route: "POST /orgs/{org}/actions/runners/registration-token", Status: http.StatusCreated}: 1,
		{Route: "POST /actions/runner-registration", Status: http.StatusOK}:                        1,
	}
	for k, n := range want {
		if calls[k] != n {
			t.Errorf("REST calls %v = %d, want %d (all: %v)", k, calls[k], n, calls)
		}
	}
	if len(calls) != len(want) {
		t.Errorf("REST calls = %v, want only the registration token and the runner registration", calls)
	}
	svc := w.ActionsServiceCalls()
	if svc[CallKey{Route: "POST " + scaleSetsRoute, Status: http.StatusOK}] != 1 ||
		svc[CallKey{Route: "GET " + scaleSetsRoute, Status: http.StatusOK}] != 1 {
		t.Errorf("Actions service calls = %v, want one create and one get", svc)
	}
}

func TestScaleSetCreateGetUpdateDelete(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, log := w.scaleSetClient("acme")
	big, err := w.AddRunnerGroup(OrgScope("acme"), "big")
	if err != nil {
		t.Fatal(err)
	}
	group, err := c.GetRunnerGroupByName(t.Context(), "big")
	if err != nil || int64(group.ID) != big || group.IsDefault {
		t.Fatalf("GetRunnerGroupByName(big) = %+v, %v; want id %d", group, err, big)
	}
	if _, err := c.GetRunnerGroupByName(t.Context(), "nope"); err == nil {
		t.Error("GetRunnerGroupByName(nope) succeeded, want an error")
	}

	set, err := c.CreateRunnerScaleSet(t.Context(), &scaleset.RunnerScaleSet{
		Name: "gpu", RunnerGroupID: int(big), Labels: []scaleset.Label{{Name: "gpu"}, {Name: "linux"}},
	})
	if err != nil {
		t.Fatalf("CreateRunnerScaleSet: %v", err)
	}
	if set.ID == 0 || set.RunnerGroupName != "big" || len(set.Labels) != 2 || set.Statistics == nil {
		t.Errorf("created set = %+v, want an id, group big, two labels, statistics", set)
	}
	if _, err := c.CreateRunnerScaleSet(t.Context(), &scaleset.RunnerScaleSet{Name: "GPU", RunnerGroupID: int(big)}); err == nil {
		t.Error("a second set of the same name in the group was created")
	} else if st, _ := log.last(); st != http.StatusBadRequest || !strings.Contains(err.Error(), "GitHub.Actions.Runtime.WebApi.RunnerScaleSetExistsException") {
		t.Errorf("second create answered %d (%v), want 400 RunnerScaleSetExistsException", st, err)
	}

	got, err := c.GetRunnerScaleSet(t.Context(), int(big), "gpu")
	if err != nil || got == nil || got.ID != set.ID {
		t.Fatalf("GetRunnerScaleSet = %+v, %v; want id %d", got, err, set.ID)
	}
	if none, err := c.GetRunnerScaleSet(t.Context(), 1, "gpu"); err != nil || none != nil {
		t.Errorf("GetRunnerScaleSet in the default group = %+v, %v; want nil, nil", none, err)
	}

	updated, err := c.UpdateRunnerScaleSet(t.Context(), set.ID, &scaleset.RunnerScaleSet{
		Name: "gpu", RunnerGroupID: int(big), Labels: []scaleset.Label{{Name: "gpu-large"}},
	})
	if err != nil || len(updated.Labels) != 1 || updated.Labels[0].Name != "gpu-large" {
		t.Fatalf("UpdateRunnerScaleSet = %+v, %v; want labels [gpu-large]", updated, err)
	}
	byID, err := c.GetRunnerScaleSetByID(t.Context(), set.ID)
	if err != nil || byID.Labels[0].Name != "gpu-large" {
		t.Fatalf("GetRunnerScaleSetByID = %+v, %v", byID, err)
	}

	if err := c.DeleteRunnerScaleSet(t.Context(), set.ID); err != nil {
		t.Fatalf("DeleteRunnerScaleSet: %v", err)
	}
	if _, err := c.GetRunnerScaleSetByID(t.Context(), set.ID); err == nil {
		t.Error("GetRunnerScaleSetByID after delete succeeded")
	} else if st, _ := log.last(); st != http.StatusNotFound || !strings.Contains(err.Error(), "GitHub.Actions.Runtime.WebApi.RunnerScaleSetNotFoundException") {
		t.Errorf("get after delete answered %d (%v), want 404 RunnerScaleSetNotFoundException", st, err)
	}
}

func TestScaleSetWithoutLabelsIsLabelledByItsName(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme/app")
	set := createSet(t, c, "app-runners")
	if len(set.Labels) != 1 || set.Labels[0].Name != "app-runners" {
		t.Errorf("labels = %+v, want the set's name", set.Labels)
	}
	if sets := w.ScaleSets(); len(sets) != 1 || sets[0].Scope != RepoScope("acme/app") {
		t.Errorf("ScaleSets() = %+v, want one set of acme/app", sets)
	}
}

func TestScaleSetOfAnotherScopeIsNotFound(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	acme, _ := w.scaleSetClient("acme")
	solo, log := w.scaleSetClient("solo")
	set := createSet(t, acme, "acme-set")
	if _, err := solo.GetRunnerScaleSetByID(t.Context(), set.ID); err == nil {
		t.Fatal("solo's admin token read acme's scale set")
	}
	if st, _ := log.last(); st != http.StatusNotFound {
		t.Errorf("answered %d, want 404", st)
	}
}

func TestActionsServiceRefusesAnExpiredAdminToken(t *testing.T) {
	clock := newFakeClock()
	w := scaleSetWorld(t, Config{Now: clock.Now})
	c, log := w.scaleSetClient("acme")
	createSet(t, c, "first")
	// The client judges the token's expiry on its own clock; the double's moved past it.
	clock.Advance(adminTokenTTL + time.Second)
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "first"); err == nil {
		t.Fatal("a call with an expired admin token succeeded")
	}
	if st, _ := log.last(); st != http.StatusUnauthorized {
		t.Errorf("answered %d, want 401", st)
	}
}

func TestActionsServiceThrottleAnswers429WithRetryAfter(t *testing.T) {
	clock := newFakeClock()
	w := scaleSetWorld(t, Config{Now: clock.Now, ActionsServiceCallsPerMinute: 2})
	c, log := w.scaleSetClient("acme")
	createSet(t, c, "throttled")
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "throttled"); err != nil {
		t.Fatalf("second call: %v", err)
	}
	clock.Advance(20 * time.Second)
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "throttled"); err == nil {
		t.Fatal("the third call in a minute of two was answered")
	}
	st, h := log.last()
	if st != http.StatusTooManyRequests || h.Get("Retry-After") != "40" {
		t.Errorf("answered %d with Retry-After %q, want 429 with 40", st, h.Get("Retry-After"))
	}
	clock.Advance(40 * time.Second)
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "throttled"); err != nil {
		t.Errorf("after the minute: %v", err)
	}
	w.SetActionsServiceThrottle(0)
	for range 3 {
		if _, err := c.GetRunnerScaleSet(t.Context(), 1, "throttled"); err != nil {
			t.Fatalf("throttle off: %v", err)
		}
	}
}

func TestActionsServiceOutageAnswersServerErrors(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, log := w.scaleSetClient("acme")
	createSet(t, c, "outage")
	w.StartActionsServiceOutage(0)
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "outage"); err == nil {
		t.Fatal("answered during the outage")
	}
	if st, _ := log.last(); st != http.StatusServiceUnavailable {
		t.Errorf("answered %d, want 503", st)
	}
	w.EndActionsServiceOutage()
	if _, err := c.GetRunnerScaleSet(t.Context(), 1, "outage"); err != nil {
		t.Errorf("after the outage: %v", err)
	}
}

func TestScaleSetCredentialsAreIssuedSecrets(t *testing.T) {
	w := scaleSetWorld(t, Config{})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "secrets")
	sc := openSession(t, c, set.ID, "test")
	jit, err := c.GenerateJitRunnerConfig(t.Context(), &scaleset.RunnerScaleSetJitRunnerSetting{Name: "secret-1"}, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	secrets := w.IssuedSecrets()
	for name, v := range map[string]string{
		"JIT configuration":   jit.EncodedJITConfig,
		"message-queue token": sc.Session().MessageQueueAccessToken,
	} {
		if !slices.Contains(secrets, v) {
			t.Errorf("the %s is not among IssuedSecrets", name)
		}
	}
	if n := len(secrets); n < 6 { // PAT, registration token, admin token, queue token, runner credential, JIT
		t.Errorf("IssuedSecrets has %d entries, want the admin and registration tokens too", n)
	}
}

func TestScaleSetClientAuthenticatesAsGitHubApp(t *testing.T) {
	w := scaleSetWorld(t, Config{App: appConfig()})
	key := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testAppKey)})
	c, err := scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
		GitHubConfigURL: w.URL() + "acme",
		GitHubAppAuth: scaleset.GitHubAppAuth{
			ClientID: strconv.FormatInt(testAppID, 10), InstallationID: testInstallationID, PrivateKey: string(key),
		},
	}, scaleset.WithRetryMax(0))
	if err != nil {
		t.Fatal(err)
	}
	createSet(t, c, "app-set")
	if n := w.CallCount("POST /app/installations/{installation_id}/access_tokens"); n != 1 {
		t.Errorf("installation token calls = %d, want 1", n)
	}
}
