// Package testworld starts the real parts runnerflow's integration tests run against: an etcd
// plus kube-apiserver pair (this file) and the Temporal dev server, each on free 127.0.0.1
// ports under a temporary directory.
package testworld

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// readyTimeout bounds the wait for /readyz. A start takes 2-4 s on an idle machine; the
// margin is for a 2-core machine that is compiling at the same time.
const readyTimeout = 90 * time.Second

// Kube is a running etcd + kube-apiserver on 127.0.0.1 with RBAC on. There is no scheduler or
// kubelet: nothing schedules, and pods run only if something (the runner simulator) plays the
// kubelet. Owner-reference garbage collection happens only once StartGarbageCollector has
// started the controller-manager's garbage collector.
type Kube struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file with the same admin credentials, for processes
	// started by tests and for a human with kubectl.
	KubeconfigPath string
	// Dir holds certificates, etcd's data and the processes' log files.
	Dir string

	client   kubernetes.Interface
	port     int
	caPEM    []byte
	tokens   map[string]string // user → static bearer token (KubeOptions.Users)
	auditLog string            // the API server's audit log; empty when not auditing
	procs    []*process        // in start order; stopped in reverse
	procsMu  sync.Mutex        // guards procs: parts like the garbage collector join later
	stopOnce sync.Once
	stopErr  error
}

// KubeOptions configures StartKubeWith.
type KubeOptions struct {
	// Dir holds certificates, etcd's data and the processes' log files.
	Dir string
	// Users are identities of their own for processes whose requests must be told apart at the
	// API server (a peer controller, the garbage collector): each gets a static bearer token in
	// group system:masters, and KubeconfigFor writes its kubeconfig.
	Users []string
	// AuditWrites records every write of Users (create, update, patch, delete, by resource and
	// object) in the API server's audit log; AuditedWrites reads it.
	AuditWrites bool
	// AuditServiceAccounts, with AuditWrites, also records the writes of every ServiceAccount:
	// processes that run as a pod's credential (ARC's scale-set listeners) rather than as one
	// of Users.
	AuditServiceAccounts bool
}

// StartKube starts etcd and kube-apiserver on free 127.0.0.1 ports under dir and waits until
// the API server answers /readyz. ctx bounds the start only; the processes run until Stop.
func StartKube(ctx context.Context, dir string) (*Kube, error) {
	return StartKubeWith(ctx, KubeOptions{Dir: dir})
}

// StartKubeWith is StartKube with identities of their own and, on demand, an audit log of
// their writes.
func StartKubeWith(ctx context.Context, opts KubeOptions) (*Kube, error) {
	dir := opts.Dir
	etcdBin, err := ToolPath("etcd")
	if err != nil {
		return nil, err
	}
	apiserverBin, err := ToolPath("kube-apiserver")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certs, err := writePKI(dir)
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	k := &Kube{Dir: dir, KubeconfigPath: filepath.Join(dir, "kubeconfig"), port: ports[2], caPEM: certs.caPEM}
	extra, err := k.identityArgs(opts)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	if err := k.startEtcd(etcdBin, etcdURL, ports[1]); err != nil {
		return nil, err
	}
	if err := k.startAPIServer(apiserverBin, etcdURL, certs, extra); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	if err := k.connect(certs); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	if err := k.waitReady(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("%w\n%s", err, k.logTails()), k.Stop())
	}
	return k, nil
}

func (k *Kube) startEtcd(bin, clientURL string, peerPort int) error {
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := startProcess(k.Dir, "etcd", bin,
		"--data-dir="+filepath.Join(k.Dir, "etcd-data"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Test data is thrown away; fsync only costs time on a busy disk.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	k.procs = append(k.procs, p)
	return nil
}

// startAPIServer starts kube-apiserver; extra are the flags of KubeOptions (static tokens, audit).
func (k *Kube) startAPIServer(bin, etcdURL string, certs *pki, extra []string) error {
	port := k.port
	args := append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + k.Dir,
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CACert,
		"--service-account-issuer=https://127.0.0.1:" + strconv.Itoa(port),
		"--service-account-key-file=" + certs.ServiceAcctPK,
		"--service-account-signing-key-file=" + certs.ServiceAcctSK,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		// No controller-manager creates the default ServiceAccount, so the admission plugin
		// that requires it would refuse every pod.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		// No Endpoints for the kubernetes Service: there is no network to reach it over.
		"--endpoint-reconciler-type=none",
	}, extra...)
	p, err := startProcess(k.Dir, "kube-apiserver", bin, args...)
	if err != nil {
		return err
	}
	k.procs = append(k.procs, p)
	return nil
}

// connect builds the admin client config and writes the kubeconfig file.
func (k *Kube) connect(certs *pki) error {
	host := k.host()
	k.Config = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: certs.caPEM, CertData: certs.adminCertPEM, KeyData: certs.adminKeyPEM,
		},
		// client-go's default of 5 QPS throttles tests that create many objects quickly.
		QPS:   200,
		Burst: 400,
	}
	client, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		return err
	}
	k.client = client
	kc := clientcmdapi.NewConfig()
	kc.Clusters["runnerflow-test"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: certs.caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: certs.adminCertPEM, ClientKeyData: certs.adminKeyPEM,
	}
	kc.Contexts["runnerflow-test"] = &clientcmdapi.Context{Cluster: "runnerflow-test", AuthInfo: "admin"}
	kc.CurrentContext = "runnerflow-test"
	return clientcmd.WriteToFile(*kc, k.KubeconfigPath)
}

// waitReady polls /readyz until it answers 200, a process exits, or the start times out.
func (k *Kube) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	httpClient, err := rest.HTTPClientFor(k.Config)
	if err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = probeReady(ctx, httpClient, k.Config.Host+"/readyz"); last == nil {
			return nil
		}
		for _, p := range k.processes() {
			if p.hasExited() {
				return fmt.Errorf("%s exited during start: %v", p.name, p.waitErr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %w (last probe: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func probeReady(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// Stop kills kube-apiserver and etcd, and the garbage collector if it runs (with their process
// groups), and waits for them to exit. It is safe to call more than once.
func (k *Kube) Stop() error {
	k.stopOnce.Do(func() {
		var errs []error
		procs := k.processes()
		for i := len(procs) - 1; i >= 0; i-- {
			errs = append(errs, procs[i].kill())
		}
		k.stopErr = errors.Join(errs...)
	})
	return k.stopErr
}

// logTails returns the end of every process log, for start errors.
func (k *Kube) logTails() string {
	var b strings.Builder
	for _, p := range k.processes() {
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", p.name, p.logPath, tail(p.logPath, 4096))
	}
	return b.String()
}

// processes returns the world's Kubernetes processes in start order.
func (k *Kube) processes() []*process {
	k.procsMu.Lock()
	defer k.procsMu.Unlock()
	return slices.Clone(k.procs)
}

// addProcess records a process that joined the cluster after its start, so Stop ends it
// (first: it is the newest).
func (k *Kube) addProcess(p *process) {
	k.procsMu.Lock()
	defer k.procsMu.Unlock()
	k.procs = append(k.procs, p)
}

// host is the API server's URL.
func (k *Kube) host() string { return "https://127.0.0.1:" + strconv.Itoa(k.port) }

// NewNamespace creates a namespace named after the test (DNS-safe, with a unique suffix from
// the API server) and deletes it when the test ends. Without a controller-manager a deleted
// namespace stays Terminating with its contents; the unique names keep tests apart anyway.
func (k *Kube) NewNamespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	var created *corev1.Namespace
	var err error
	// A generated name can clash (five random characters); the API server then answers
	// AlreadyExists and a second try draws a new suffix.
	for range 3 {
		if created, err = k.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		t.Fatalf("create namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := k.client.CoreV1().Namespaces().Delete(ctx, created.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", created.Name, err)
		}
	})
	return created.Name
}

// namespacePrefix turns a test name into a DNS label prefix ending in "-", short enough to
// leave room for the generated suffix.
func namespacePrefix(testName string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40]
	}
	s = strings.TrimRight(s, "-")
	if s == "" {
		s = "test"
	}
	return s + "-"
}

// ImpersonatingConfig returns the admin config acting as user (and groups), so a test can
// grant a Role to that user and prove the Role alone suffices. The API server adds
// system:authenticated to the impersonated groups.
func (k *Kube) ImpersonatingConfig(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// ServiceAccountConfig returns a configuration that authenticates as the ServiceAccount ns/name
// with a token the API server issues for it (TokenRequest, as the kubelet mounts one in a
// pod), and no client certificate: what a pod running as that ServiceAccount may do, this may
// do. The ServiceAccount is created if it does not exist.
func (k *Kube) ServiceAccountConfig(ctx context.Context, ns, name string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := k.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", ns, name, err)
	}
	tr, err := k.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(k.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1. They are released before
// the servers bind them; a clash with another process in between is possible but rare.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so the same port is not drawn twice
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
