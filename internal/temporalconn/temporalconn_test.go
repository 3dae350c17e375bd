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

func TestPlaintextByDefault(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "")
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--temporal-address=temporal:7233", "--namespace=ci"}); err != nil {
		t.Fatal(err)
	}
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "temporal:7233" || opts.Namespace != "ci" || opts.ConnectionOptions.TLS != nil || opts.Credentials != nil {
		t.Errorf("options %+v, want plaintext to temporal:7233 in ci", opts)
	}
}

func TestAPIKeyFromEnvironmentImpliesTLS(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "cloud-key")
	var c Config
	c.RegisterFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("an API key without TLS: %+v", opts)
	}
}

func TestAPIKeyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("cloud-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if key, err := (Config{APIKeyFile: file}).apiKey(); err != nil || key != "cloud-key" {
		t.Errorf("key %q, %v", key, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := (Config{Address: "x:1", APIKeyFile: f}).ClientOptions(); err == nil {
			t.Errorf("key file %s accepted", f)
		}
	}
}

func TestBadTLSSettingsAreRefused(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for want, c := range map[string]Config{
		"both":                {Address: "x:1", TLSCertFile: "cert.pem"},
		"no PEM certificate":  {Address: "x:1", TLSCAFile: notPEM},
		"client certificate":  {Address: "x:1", TLSCertFile: notPEM, TLSKeyFile: notPEM},
		"temporal TLS CA":     {Address: "x:1", TLSCAFile: filepath.Join(dir, "missing.pem")},
		"address is required": {},
	} {
		if _, err := c.ClientOptions(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c, err, want)
		}
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

	cfg, err := (Config{TLSCertFile: certFile, TLSKeyFile: keyFile, TLSCAFile: caFile, TLSServerName: "temporal.test"}).TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
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
