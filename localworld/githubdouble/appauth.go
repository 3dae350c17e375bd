package githubdouble

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// installationTokenTTL is how long GitHub's installation access tokens live.
const installationTokenTTL = time.Hour

// jwtSkew is the clock drift GitHub tolerates on "iat"; ghinstallation backdates iat by 30 s.
const jwtSkew = 60 * time.Second

// jwtMaxLifetime is the furthest in the future GitHub accepts an App JWT's "exp".
const jwtMaxLifetime = 10 * time.Minute

// handleApp registers an endpoint authenticated with a GitHub App JWT instead of a token.
func (s *Server) handleApp(mux *http.ServeMux, pattern string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() { s.count(pattern, rec.status, rec.Header()) }()
		if s.cfg.App == nil {
			s.answerUnauthenticated(rec, false)
			return
		}
		if err := verifyAppJWT(bearer(r), s.cfg.App, s.now()); err != nil {
			s.log.Debug("rejected App JWT", "error", err)
			s.answerUnauthenticated(rec, false)
			return
		}
		release, ok := s.admit(rec, fmt.Sprintf("app:%d", s.cfg.App.ID), r.Method)
		if !ok {
			return
		}
		defer release()
		h(rec, r)
	})
}

// jwtClaims are the claims GitHub reads from an App JWT. The issuer may be a number or a
// string (ghinstallation sends the App id as a string).
type jwtClaims struct {
	Issuer    json.RawMessage `json:"iss"`
	IssuedAt  *int64          `json:"iat"`
	ExpiresAt *int64          `json:"exp"`
}

// verifyAppJWT checks an RS256 JWT the way GitHub does for App authentication: signature by
// the App's key, issuer is the App id, issued no later than now (with skew), not expired and
// expiring at most ten minutes ahead.
func verifyAppJWT(token string, app *AppConfig, now time.Time) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &header); err != nil || header.Alg != "RS256" {
		return errors.New("JWT header is not RS256")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return errors.New("JWT signature is not base64url")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(app.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		return errors.New("JWT signature does not verify with the App's public key")
	}
	var claims jwtClaims
	if err := decodeSegment(parts[1], &claims); err != nil {
		return errors.New("JWT claims are not JSON")
	}
	if iss := strings.Trim(string(claims.Issuer), `"`); iss != strconv.FormatInt(app.ID, 10) {
		return errors.New("JWT issuer is not the App id")
	}
	switch {
	case claims.IssuedAt == nil || claims.ExpiresAt == nil:
		return errors.New("JWT lacks iat or exp")
	case time.Unix(*claims.IssuedAt, 0).After(now.Add(jwtSkew)):
		return errors.New("JWT issued in the future")
	case !time.Unix(*claims.ExpiresAt, 0).After(now):
		return errors.New("JWT expired")
	case time.Unix(*claims.ExpiresAt, 0).After(now.Add(jwtMaxLifetime + jwtSkew)):
		return errors.New("JWT expires too far in the future")
	}
	return nil
}

func decodeSegment(seg string, into any) error {
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// installationPermissions are the permissions runnerflow's App needs, as GitHub reports them.
var installationPermissions = map[string]string{
	"actions":                          "read",
	"administration":                   "write",
	"metadata":                         "read",
	"organization_self_hosted_runners": "write",
}

func (s *Server) handleAccessToken(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
	if err != nil || id != s.cfg.App.InstallationID {
		writeError(w, http.StatusNotFound, "Not Found", docsAppAuth)
		return
	}
	s.mu.Lock()
	token := "ghs_" + randomAlnum(36)
	expires := s.now().Add(installationTokenTTL)
	s.st.apiTokens[token] = apiToken{kind: tokenInstallation, expires: expires}
	s.recordSecret(token)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":                token,
		"expires_at":           formatTime(expires),
		"permissions":          installationPermissions,
		"repository_selection": "all",
	})
}
