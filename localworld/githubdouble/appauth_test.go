package githubdouble

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	jwt "github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v92/github"
)

const (
	testAppID          = 4242
	testInstallationID = 777
)

// testAppKey is generated once: RSA key generation is slow.
var testAppKey = func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // crypto/rand failing leaves no test meaningful
	}
	return k
}()

func appConfig() *AppConfig {
	return &AppConfig{ID: testAppID, InstallationID: testInstallationID, PublicKey: &testAppKey.PublicKey}
}

// appClient authenticates as the App's installation with ghinstallation, as runnerflow does.
func (w *world) appClient(key *rsa.PrivateKey, installationID int64, base http.RoundTripper) *github.Client {
	w.t.Helper()
	if base == nil {
		base = http.DefaultTransport
	}
	atr := ghinstallation.NewAppsTransportFromPrivateKey(base, testAppID, key)
	itr := ghinstallation.NewFromAppsTransport(atr, installationID)
	itr.BaseURL = strings.TrimSuffix(w.URL(), "/")
	return w.client("", itr)
}

func TestAppInstallationTokenAuthenticates(t *testing.T) {
	w := startWorld(t, Config{App: appConfig()})
	c := w.appClient(testAppKey, testInstallationID, nil)
	ctx := context.Background()
	if _, err := w.jit(ctx, c, "acme", "via-app", "linux"); err != nil {
		t.Fatalf("JIT config with an installation token: %v", err)
	}
	if n := w.Calls()[CallKey{Route: "POST /app/installations/{installation_id}/access_tokens", Status: http.StatusCreated}]; n != 1 {
		t.Fatalf("access token calls %d, want 1 (the token is cached)", n)
	}
	// Enterprise runner endpoints refuse installation tokens.
	if _, _, err := c.Enterprise.ListRunners(ctx, "megacorp", nil); statusOf(err) != http.StatusForbidden {
		t.Fatalf("enterprise endpoint with an installation token: %v, want 403", err)
	}
	var tokenIssued bool
	for _, s := range w.IssuedSecrets() {
		tokenIssued = tokenIssued || strings.HasPrefix(s, "ghs_")
	}
	if !tokenIssued {
		t.Fatal("installation token missing from IssuedSecrets")
	}
}

func TestAppJWTFromAnotherKeyIsRejected(t *testing.T) {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	w := startWorld(t, Config{App: appConfig()})
	_, _, err = w.appClient(other, testInstallationID, nil).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("JWT signed by another key: %v, want a 401", err)
	}
	_, _, err = w.appClient(testAppKey, 9999, nil).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown installation: %v, want a 404", err)
	}
}

func TestVerifyAppJWT(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sign := func(iss string, iat, exp time.Time) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
			Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp),
		}).SignedString(testAppKey)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if err := verifyAppJWT(sign("4242", now.Add(-30*time.Second), now.Add(5*time.Minute)), appConfig(), now); err != nil {
		t.Fatalf("valid JWT rejected: %v", err)
	}
	for name, token := range map[string]string{
		"empty":              "",
		"not a JWT":          "abc",
		"bad segments":       "a.b.c",
		"alg none":           "eyJhbGciOiJub25lIn0.eyJpc3MiOiI0MjQyIn0.",
		"other issuer":       sign("1", now, now.Add(5*time.Minute)),
		"expired":            sign("4242", now.Add(-20*time.Minute), now.Add(-10*time.Minute)),
		"issued in future":   sign("4242", now.Add(5*time.Minute), now.Add(9*time.Minute)),
		"lives over 10 min":  sign("4242", now, now.Add(30*time.Minute)),
		"tampered signature": sign("4242", now, now.Add(5*time.Minute)) + "A",
	} {
		if err := verifyAppJWT(token, appConfig(), now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
