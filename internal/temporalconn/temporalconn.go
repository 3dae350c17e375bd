// Package temporalconn is how runnerflow's binaries reach Temporal: address and namespace,
// TLS (mutual TLS with a client certificate, or server TLS only) and a Temporal Cloud API key.
//
// The settings are read as the temporal CLI reads them, by the SDK's envconfig: a profile of
// the CLI's configuration file ($TEMPORAL_CONFIG_FILE, else temporalio/temporal.toml in the
// user's configuration folder; $TEMPORAL_PROFILE, else "default"), then the CLI's environment
// variables (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*), then the
// flags, which win. So a user's `temporal` profile works unchanged. Secrets (the API key) come
// from the environment or a file, never from a flag value, which any user of the machine can
// read in the process list.
package temporalconn

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// Defaults where neither a flag, the environment nor a profile says otherwise: a local dev server.
const (
	// DefaultAddress is the dev server's frontend.
	DefaultAddress = "127.0.0.1:7233"
	// DefaultNamespace is the namespace every Temporal server has.
	DefaultNamespace = "default"
)

// Config is what the flags say about the connection. Empty fields (and TLS false) leave the
// setting to the environment and the profile.
type Config struct {
	Address   string
	Namespace string
	// TLS turns TLS on with the system's root CAs; any of the settings below, and an API key,
	// imply it.
	TLS bool
	// TLSCertFile and TLSKeyFile are the client certificate for mutual TLS (both or neither).
	TLSCertFile string
	TLSKeyFile  string
	// TLSCAFile verifies the server with this CA instead of the system's roots.
	TLSCAFile string
	// TLSServerName overrides the name the server certificate is checked against.
	TLSServerName string
	// APIKeyFile holds a Temporal Cloud API key; it wins over TEMPORAL_API_KEY.
	APIKeyFile string
}

// RegisterFlags defines the connection flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Address, "temporal-address", "", "Temporal frontend host:port (default: $TEMPORAL_ADDRESS, the temporal CLI profile's, else "+DefaultAddress+")")
	fs.StringVar(&c.Namespace, "namespace", "", "Temporal namespace (default: $TEMPORAL_NAMESPACE, the profile's, else "+DefaultNamespace+")")
	fs.BoolVar(&c.TLS, "temporal-tls", false, "connect with TLS using the system's root CAs (implied by the other TLS settings and by an API key; $TEMPORAL_TLS)")
	fs.StringVar(&c.TLSCertFile, "temporal-tls-cert", "", "client certificate for mutual TLS, PEM file ($TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&c.TLSKeyFile, "temporal-tls-key", "", "client certificate's private key, PEM file ($TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&c.TLSCAFile, "temporal-tls-ca", "", "CA that signed the server's certificate, PEM file ($TEMPORAL_TLS_SERVER_CA_CERT_PATH)")
	fs.StringVar(&c.TLSServerName, "temporal-tls-server-name", "", "server name to verify the certificate against ($TEMPORAL_TLS_SERVER_NAME)")
	fs.StringVar(&c.APIKeyFile, "temporal-api-key-file", "", "file holding a Temporal Cloud API key (default: $TEMPORAL_API_KEY, the profile's)")
}

// renamedEnv are the variables earlier runnerflow releases read, with the temporal CLI's names
// that replace them. A setting under an old name would otherwise be dropped without a word.
var renamedEnv = map[string]string{
	"TEMPORAL_TLS_CERT": "TEMPORAL_TLS_CLIENT_CERT_PATH",
	"TEMPORAL_TLS_KEY":  "TEMPORAL_TLS_CLIENT_KEY_PATH",
	"TEMPORAL_TLS_CA":   "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
}

// ClientOptions are SDK client options for this connection: the profile, the environment and
// the flags, in that order; callers add their logger, identity and metrics handler. Errors name
// the setting that could not be used.
func (c Config) ClientOptions() (client.Options, error) {
	for old, name := range renamedEnv {
		if _, ok := os.LookupEnv(old); ok {
			return client.Options{}, fmt.Errorf("%s is no longer read: set %s, the temporal CLI's name for it", old, name)
		}
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal settings: %w", err)
	}
	if err := c.apply(&prof); err != nil {
		return client.Options{}, err
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal settings: %w", err)
	}
	return opts, nil
}

// apply lays the flags that were given over prof, and the defaults under what is still empty.
func (c Config) apply(prof *envconfig.ClientConfigProfile) error {
	prof.Address = firstNonEmpty(c.Address, prof.Address, DefaultAddress)
	prof.Namespace = firstNonEmpty(c.Namespace, prof.Namespace, DefaultNamespace)
	if c.APIKeyFile != "" {
		key, err := readAPIKey(c.APIKeyFile)
		if err != nil {
			return err
		}
		prof.APIKey = key
	}
	if !c.TLS && c.TLSCertFile == "" && c.TLSKeyFile == "" && c.TLSCAFile == "" && c.TLSServerName == "" {
		return nil
	}
	if prof.TLS == nil {
		prof.TLS = &envconfig.ClientConfigTLS{}
	}
	t := prof.TLS
	t.Disabled = false
	if c.TLSCertFile != "" || c.TLSKeyFile != "" {
		// A pair given by flags replaces the profile's, path or data, as a whole.
		t.ClientCertPath, t.ClientKeyPath, t.ClientCertData, t.ClientKeyData = c.TLSCertFile, c.TLSKeyFile, nil, nil
	}
	if c.TLSCAFile != "" {
		t.ServerCACertPath, t.ServerCACertData = c.TLSCAFile, nil
	}
	t.ServerName = firstNonEmpty(c.TLSServerName, t.ServerName)
	return nil
}

// readAPIKey reads an API key file; a key file that holds nothing is a mistake, not "no key".
func readAPIKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("temporal API key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("temporal API key file %s is empty", path)
	}
	return key, nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
