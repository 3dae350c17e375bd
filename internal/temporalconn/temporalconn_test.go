package temporalconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// isolate hides the machine's Temporal settings from a test: every TEMPORAL_ variable is unset
// (and restored afterwards) and the profile file is one that does not exist.
func isolate(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TEMPORAL_") {
			t.Setenv(name, "") // restores the value after the test
			os.Unsetenv(name)
		}
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "missing.toml"))
}

func parseFlags(t *testing.T, args ...string) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPlaintextByDefault(t *testing.T) {
	isolate(t)
	opts, err := parseFlags(t, "--temporal-address=temporal:7233", "--namespace=ci").ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "temporal:7233" || opts.Namespace != "ci" || opts.ConnectionOptions.TLS != nil || opts.Credentials != nil {
		t.Errorf("options %+v, want plaintext to temporal:7233 in ci", opts)
	}
}

func TestDefaultsAreALocalDevServer(t *testing.T) {
	isolate(t)
	opts, err := parseFlags(t).ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != DefaultAddress || opts.Namespace != DefaultNamespace || opts.ConnectionOptions.TLS != nil {
		t.Errorf("options %+v, want plaintext to %s in %s", opts, DefaultAddress, DefaultNamespace)
	}
}

func TestAPIKeyFromEnvironmentImpliesTLS(t *testing.T) {
	isolate(t)
	t.Setenv("TEMPORAL_API_KEY", "cloud-key")
	opts, err := parseFlags(t).ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("an API key without TLS: %+v", opts)
	}
}

// A user's temporal CLI profile works unchanged; the environment overrides it and the flags
// override both.
func TestProfileThenEnvironmentThenFlags(t *testing.T) {
	isolate(t)
	profile := filepath.Join(t.TempDir(), "temporal.toml")
	if err := os.WriteFile(profile, []byte(`[profile.cloud]
address = "profile.tmprl.cloud:7233"
namespace = "profile-ns"
api_key = "profile-key"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", profile)
	t.Setenv("TEMPORAL_PROFILE", "cloud")
	opts, err := parseFlags(t).ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "profile.tmprl.cloud:7233" || opts.Namespace != "profile-ns" || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("from the profile: %+v, want its address, namespace and API key (with TLS)", opts)
	}
	t.Setenv("TEMPORAL_NAMESPACE", "env-ns")
	opts, err = parseFlags(t, "--temporal-address=flag:7233").ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "flag:7233" || opts.Namespace != "env-ns" {
		t.Errorf("address %q namespace %q, want the flag's and the environment's", opts.HostPort, opts.Namespace)
	}
}

func TestAPIKeyFile(t *testing.T) {
	isolate(t)
	t.Setenv("TEMPORAL_API_KEY", "env-key")
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("cloud-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := readAPIKey(file); err != nil || key != "cloud-key" {
		t.Errorf("key %q, %v", key, err)
	}
	if opts, err := parseFlags(t, "--temporal-api-key-file", file).ClientOptions(); err != nil || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("a key file: %+v, %v; want credentials and TLS", opts, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := (Config{APIKeyFile: f}).ClientOptions(); err == nil {
			t.Errorf("key file %s accepted", f)
		}
	}
}

func TestBadTLSSettingsAreRefused(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for want, c := range map[string]Config{
		"other must be present":    {TLSCertFile: "cert.pem"},
		"failed adding server CA":  {TLSCAFile: notPEM},
		"failed loading client":    {TLSCertFile: notPEM, TLSKeyFile: notPEM},
		"failed reading server CA": {TLSCAFile: filepath.Join(dir, "missing.pem")},
	} {
		if _, err := c.ClientOptions(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c, err, want)
		}
	}
}

// A setting under a name runnerflow used to read is refused with the name that replaces it,
// rather than silently dropped.
func TestRenamedVariablesAreRefused(t *testing.T) {
	for old, name := range renamedEnv {
		t.Run(old, func(t *testing.T) {
			isolate(t)
			t.Setenv(old, "/tls/file.pem")
			if _, err := parseFlags(t).ClientOptions(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s set: error %v, want one naming %s", old, err, name)
			}
		})
	}
}

// The TLS configuration built from files completes a mutual-TLS handshake with a server that
// trusts the client certificate and is trusted through the CA file.
func TestMutualTLSHandshake(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "test CA", true)
	server, serverKey := newCert(t, ca, caKey, "temporal.test", false)
	clientCert, clientKey := newCert(t, ca, caKey, "runnerflow-worker", false)
	caFile := writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	certFile := writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Raw)
	keyFile := writePEM(t, dir, "client-key.pem", "EC PRIVATE KEY", marshalKey(t, clientKey))

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{server.Raw}, PrivateKey: serverKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: pool,
	}
	srv.StartTLS()
	defer srv.Close()

	// The certificate comes by the temporal CLI's environment variables, the CA and server
	// name by flags: both sources make one TLS configuration.
	isolate(t)
	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", certFile)
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", keyFile)
	opts, err := (Config{TLSCAFile: caFile, TLSServerName: "temporal.test"}).ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	cfg := opts.ConnectionOptions.TLS
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "runnerflow-worker" {
		t.Errorf("server saw client %q", b)
	}
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, name string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:        isCA, BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func marshalKey(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
