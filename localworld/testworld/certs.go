package testworld

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files of the test cluster's certificates. Everything is generated fresh per
// cluster: nothing is shared between test processes and nothing outlives the directory.
type pki struct {
	CACert        string // CA that signs the serving and client certificates
	ServingCert   string // kube-apiserver serving certificate for 127.0.0.1 and localhost
	ServingKey    string
	AdminCert     string // client certificate in group system:masters
	AdminKey      string
	ServiceAcctPK string // RSA public key that verifies service-account tokens
	ServiceAcctSK string // RSA private key that signs service-account tokens

	caPEM, adminCertPEM, adminKeyPEM []byte
}

// certAuthority is a CA key pair kept in memory while the leaf certificates are signed.
type certAuthority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// writePKI generates the cluster's certificates and keys into dir.
func writePKI(dir string) (*pki, error) {
	p := &pki{
		CACert:        filepath.Join(dir, "ca.crt"),
		ServingCert:   filepath.Join(dir, "apiserver.crt"),
		ServingKey:    filepath.Join(dir, "apiserver.key"),
		AdminCert:     filepath.Join(dir, "admin.crt"),
		AdminKey:      filepath.Join(dir, "admin.key"),
		ServiceAcctPK: filepath.Join(dir, "sa.pub"),
		ServiceAcctSK: filepath.Join(dir, "sa.key"),
	}
	ca, caPEM, err := newCA()
	if err != nil {
		return nil, err
	}
	p.caPEM = caPEM
	if err := os.WriteFile(p.CACert, caPEM, 0o600); err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if _, _, err := ca.issue(serving, p.ServingCert, p.ServingKey); err != nil {
		return nil, err
	}
	// The system:masters group is what makes this client a cluster admin: the API server
	// authorizes that group before RBAC is consulted.
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "runnerflow-test-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if p.adminCertPEM, p.adminKeyPEM, err = ca.issue(admin, p.AdminCert, p.AdminKey); err != nil {
		return nil, err
	}
	if err := writeServiceAccountKeys(p.ServiceAcctPK, p.ServiceAcctSK); err != nil {
		return nil, err
	}
	return p, nil
}

func newCA() (*certAuthority, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "runnerflow-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &certAuthority{cert: cert, key: key}, pemBlock("CERTIFICATE", der), nil
}

// issue signs tmpl with the CA, writes certificate and key files and returns their PEM bytes.
func (ca *certAuthority) issue(tmpl *x509.Certificate, certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM, keyPEM = pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER)
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// writeServiceAccountKeys writes the RSA pair kube-apiserver signs and verifies
// service-account tokens with; the API server refuses to start without one.
func writeServiceAccountKeys(pubPath, keyPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(pubPath, pemBlock("PUBLIC KEY", pub), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600)
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
