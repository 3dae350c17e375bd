// Package temporalconn is how runnerflow's binaries reach Temporal: address and namespace,
// TLS (mutual TLS with a client certificate, or server TLS only) and a Temporal Cloud API key.
// Flags and environment variables are named as the temporal CLI names them, so one set of
// settings serves both. Secrets (the API key) come from the environment or a file, never from
// a flag value, which any user of the machine can read in the process list.
package temporalconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
)

// Config is how to reach Temporal. Zero TLS settings and no API key mean plaintext, as a local
// dev server or a cluster-internal frontend without TLS expects.
type Config struct {
	Address   string
	Namespace string
	// TLS turns TLS on with the system's root CAs; any of the settings below implies it.
	TLS bool
	// TLSCertFile and TLSKeyFile are the client certificate for mutual TLS (both or neither).
	TLSCertFile string
	TLSKeyFile  string
	// TLSCAFile verifies the server with this CA instead of the system's roots.
	TLSCAFile string
	// TLSServerName overrides the name the server certificate is checked against.
	TLSServerName string
	// APIKey authenticates to Temporal Cloud (TEMPORAL_API_KEY); APIKeyFile is read when set.
	APIKey     string
	APIKeyFile string
}

// RegisterFlags defines the connection flags on fs, with defaults from the temporal CLI's
// environment variables.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Address, "temporal-address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port ($TEMPORAL_ADDRESS)")
	fs.StringVar(&c.Namespace, "namespace", envOr("TEMPORAL_NAMESPACE", "default"), "Temporal namespace ($TEMPORAL_NAMESPACE)")
	fs.BoolVar(&c.TLS, "temporal-tls", false, "connect with TLS using the system's root CAs (implied by the other TLS flags and by an API key)")
	fs.StringVar(&c.TLSCertFile, "temporal-tls-cert", os.Getenv("TEMPORAL_TLS_CERT"), "client certificate for mutual TLS, PEM file ($TEMPORAL_TLS_CERT)")
	fs.StringVar(&c.TLSKeyFile, "temporal-tls-key", os.Getenv("TEMPORAL_TLS_KEY"), "client certificate's private key, PEM file ($TEMPORAL_TLS_KEY)")
	fs.StringVar(&c.TLSCAFile, "temporal-tls-ca", os.Getenv("TEMPORAL_TLS_CA"), "CA that signed the server's certificate, PEM file ($TEMPORAL_TLS_CA)")
	fs.StringVar(&c.TLSServerName, "temporal-tls-server-name", os.Getenv("TEMPORAL_TLS_SERVER_NAME"), "server name to verify the certificate against ($TEMPORAL_TLS_SERVER_NAME)")
	fs.StringVar(&c.APIKeyFile, "temporal-api-key-file", "", "file holding a Temporal Cloud API key (default: $TEMPORAL_API_KEY)")
	c.APIKey = os.Getenv("TEMPORAL_API_KEY")
}

// TLSConfig is the connection's TLS configuration, nil for plaintext. Errors name the file
// that could not be used.
func (c Config) TLSConfig() (*tls.Config, error) {
	key, err := c.apiKey()
	if err != nil {
		return nil, err
	}
	if !c.TLS && c.TLSCertFile == "" && c.TLSKeyFile == "" && c.TLSCAFile == "" && c.TLSServerName == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, errors.New("temporal TLS: a client certificate needs both --temporal-tls-cert and --temporal-tls-key")
	}
	if c.TLSCertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS client certificate %s: %w", c.TLSCertFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal TLS CA %s holds no PEM certificate", c.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Credentials are the connection's credentials: an API key, or nil.
func (c Config) Credentials() (client.Credentials, error) {
	key, err := c.apiKey()
	if err != nil || key == "" {
		return nil, err
	}
	return client.NewAPIKeyStaticCredentials(key), nil
}

// apiKey is the key from APIKeyFile, else APIKey.
func (c Config) apiKey() (string, error) {
	if c.APIKeyFile == "" {
		return c.APIKey, nil
	}
	b, err := os.ReadFile(c.APIKeyFile)
	if err != nil {
		return "", fmt.Errorf("temporal API key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("temporal API key file %s is empty", c.APIKeyFile)
	}
	return key, nil
}

// ClientOptions are SDK client options for this connection; callers add their logger,
// identity and metrics handler.
func (c Config) ClientOptions() (client.Options, error) {
	if c.Address == "" {
		return client.Options{}, errors.New("temporal address is required")
	}
	tlsCfg, err := c.TLSConfig()
	if err != nil {
		return client.Options{}, err
	}
	creds, err := c.Credentials()
	if err != nil {
		return client.Options{}, err
	}
	return client.Options{
		HostPort: c.Address, Namespace: c.Namespace, Credentials: creds,
		ConnectionOptions: client.ConnectionOptions{TLS: tlsCfg},
	}, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
