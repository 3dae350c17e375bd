package testworld

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// actions-runner-controller (ARC), the benchmark's peer, run as released: its controller
// manager and GitHub webhook server, built by scripts/tools.sh from ARC's own module
// (tools/arc), started as processes against the world's API server and the GitHub double.
// Nothing of ARC is compiled into runnerflow.
const (
	// ARCVersion is the release scripts/tools.sh builds (tools/arc/go.mod requires it).
	ARCVersion = "v0.27.6"
	// ARCControllerUser and ARCWebhookServerUser are the identities ARC's two processes act as
	// when the cluster was started with them among KubeOptions.Users (ARCUsers), so their
	// writes can be counted from the API server's audit log.
	ARCControllerUser    = "actions-runner-controller"
	ARCWebhookServerUser = "arc-github-webhook-server"
	// DefaultARCSyncPeriod is ARC's own default --sync-period: how often every resource is
	// reconciled again without a change. It bounds how late ARC scales down.
	DefaultARCSyncPeriod = time.Minute
)

// ARCGroupVersion is the API of ARC's custom resources (RunnerDeployment,
// HorizontalRunnerAutoscaler, RunnerReplicaSet, Runner, RunnerSet).
var ARCGroupVersion = schema.GroupVersion{Group: "actions.summerwind.dev", Version: "v1alpha1"}

// ARCUsers are ARC's identities, for KubeOptions.Users.
func ARCUsers() []string { return []string{ARCControllerUser, ARCWebhookServerUser} }

// ARCOptions configures StartARC.
type ARCOptions struct {
	// Kube is the cluster ARC runs against; its CRDs must be installed (InstallARCCRDs).
	Kube *Kube
	// Namespace is the one namespace both processes watch (--watch-namespace), as a namespaced
	// installation of ARC does.
	Namespace string
	// GitHubURL is the REST API's base URL (the double's URL, ending in "/"), GitHubToken a
	// personal access token it accepts.
	GitHubURL, GitHubToken string
	// WebhookSecret is the secret GitHub signs workflow_job webhooks with.
	WebhookSecret string
	// SyncPeriod is the controller manager's --sync-period; zero means DefaultARCSyncPeriod.
	SyncPeriod time.Duration
	// Dir holds ARC's logs and serving certificate; empty means "arc" under the cluster's Dir.
	Dir string
}

// ARC is a running actions-runner-controller: the controller manager (RunnerDeployment,
// RunnerReplicaSet, Runner, runner pod and HorizontalRunnerAutoscaler controllers) and the
// GitHub webhook server that turns workflow_job events into capacity reservations.
type ARC struct {
	// WebhookURL is where GitHub delivers workflow_job webhooks.
	WebhookURL string
	// SyncPeriod is the controller manager's --sync-period.
	SyncPeriod time.Duration
	// Dir holds the processes' logs.
	Dir string

	procs    []*process
	stopOnce sync.Once
	stopErr  error
}

// StartARC starts ARC's controller manager and webhook server and returns once both serve.
// The webhook server gets no GitHub credential: with one it would list the organization's
// runner groups on every event, an extra call per webhook that ARC makes optional.
func StartARC(ctx context.Context, opts ARCOptions) (_ *ARC, err error) {
	manager, err := ToolPath("arc-controller-manager")
	if err != nil {
		return nil, err
	}
	webhookServer, err := ToolPath("arc-github-webhook-server")
	if err != nil {
		return nil, err
	}
	if opts.Kube == nil || opts.Namespace == "" || opts.GitHubURL == "" || opts.GitHubToken == "" || opts.WebhookSecret == "" {
		return nil, errors.New("testworld: ARCOptions needs Kube, Namespace, GitHubURL, GitHubToken and WebhookSecret")
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultARCSyncPeriod
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(opts.Kube.Dir, "arc")
	}
	a := &ARC{SyncPeriod: opts.SyncPeriod, Dir: opts.Dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Stop())
		}
	}()
	if err := a.startManager(ctx, manager, opts); err != nil {
		return nil, err
	}
	if err := a.startWebhookServer(ctx, webhookServer, opts); err != nil {
		return nil, err
	}
	return a, nil
}

// startManager runs the controller manager. Its admission webhook server (which a cluster
// would call to default and validate ARC's resources) needs a serving certificate in
// $TMPDIR/k8s-webhook-server/serving-certs even though nothing here calls it.
func (a *ARC) startManager(ctx context.Context, bin string, opts ARCOptions) error {
	tmp := filepath.Join(opts.Dir, "tmp")
	if err := writeServingCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs")); err != nil {
		return err
	}
	kubeconfig, err := opts.Kube.kubeconfigOf(ARCControllerUser)
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	metrics := "127.0.0.1:" + strconv.Itoa(ports[0])
	env := append(baseEnv(opts.Dir),
		"TMPDIR="+tmp,
		"KUBECONFIG="+kubeconfig,
		"GITHUB_TOKEN="+opts.GitHubToken,
		// The REST base, as for github.com; ARC's enterprise setting would append api/v3.
		"GITHUB_URL="+opts.GitHubURL,
	)
	p, err := startProcessWithEnv(opts.Dir, "arc-controller-manager", bin, env,
		"--watch-namespace="+opts.Namespace,
		"--metrics-addr="+metrics,
		"--port="+strconv.Itoa(ports[1]),
		"--sync-period="+opts.SyncPeriod.String(),
		"--log-level=info",
		"--log-format=json",
	)
	if err != nil {
		return err
	}
	a.procs = append(a.procs, p)
	if err := waitHTTP(ctx, p, "http://"+metrics+"/metrics"); err != nil {
		return err
	}
	// The metrics listener opens before the controllers run; the last to start is the
	// autoscaler's.
	return waitForLogLine(ctx, p, "Starting workers", "horizontalrunnerautoscaler-controller")
}

// startWebhookServer runs the GitHub webhook server.
func (a *ARC) startWebhookServer(ctx context.Context, bin string, opts ARCOptions) error {
	kubeconfig, err := opts.Kube.kubeconfigOf(ARCWebhookServerUser)
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	env := append(baseEnv(opts.Dir), "KUBECONFIG="+kubeconfig, "GITHUB_WEBHOOK_SECRET_TOKEN="+opts.WebhookSecret)
	p, err := startProcessWithEnv(opts.Dir, "arc-github-webhook-server", bin, env,
		"--webhook-addr="+addr,
		"--metrics-addr=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--watch-namespace="+opts.Namespace,
		"--log-level=info",
		"--log-format=json",
	)
	if err != nil {
		return err
	}
	a.procs = append(a.procs, p)
	a.WebhookURL = "http://" + addr + "/"
	// GET / answers "webhook server is running" once it serves.
	if err := waitHTTP(ctx, p, a.WebhookURL); err != nil {
		return err
	}
	return waitForLogLine(ctx, p, "Starting workers", "webhookbasedautoscaler")
}

// baseEnv is the environment ARC's processes start from: nothing of the test process's (no
// GitHub or Kubernetes credential of the machine leaks in), a home of their own.
func baseEnv(dir string) []string {
	return []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
}

// Stop kills both processes and waits for them to exit. It is safe to call more than once.
func (a *ARC) Stop() error {
	a.stopOnce.Do(func() {
		var errs []error
		for i := len(a.procs) - 1; i >= 0; i-- {
			errs = append(errs, a.procs[i].kill())
		}
		a.stopErr = errors.Join(errs...)
	})
	return a.stopErr
}

// LogTails returns the end of both processes' logs, for a failure report.
func (a *ARC) LogTails() string {
	var b strings.Builder
	for _, p := range a.procs {
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", p.name, p.logPath, tail(p.logPath, 4096))
	}
	return b.String()
}

// writeServingCert writes a self-signed tls.crt and tls.key for 127.0.0.1 into dir.
func writeServingCert(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, _, err := newCA()
	if err != nil {
		return err
	}
	_, _, err = ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "arc-admission-webhook"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	return err
}

// waitHTTP polls url until it answers 200, the process exits, or the start times out.
func waitHTTP(ctx context.Context, p *process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.hasExited() {
			return fmt.Errorf("%s exited during start: %v\n%s", p.name, p.waitErr, tail(p.logPath, 4096))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving %s: %w\n%s", p.name, url, ctx.Err(), tail(p.logPath, 4096))
		case <-tick.C:
		}
	}
}

// InstallARCCRDs creates ARC's actions.summerwind.dev CustomResourceDefinitions, from the
// module ARC was built from (scripts/tools.sh copies them to bin/arc-crds.yaml), and waits
// until the API server serves them. They are applied server-side: a client-side apply would
// keep each whole definition in an annotation, which is larger than annotations may be.
func InstallARCCRDs(ctx context.Context, cfg *rest.Config) error {
	return installCRDs(ctx, cfg, "arc-crds.yaml")
}

// installCRDs applies the CustomResourceDefinitions of a multi-document tool file.
func installCRDs(ctx context.Context, cfg *rest.Config, tool string) error {
	path, err := ToolPath(tool)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := client.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 64<<10)
	var names []string
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("decode %s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue // an empty document between separators
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := crds.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "runnerflow-testworld", Force: &force}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		if err := waitEstablished(ctx, crds, name); err != nil {
			return err
		}
	}
	return nil
}

// waitEstablished waits until a CRD's Established condition is True.
func waitEstablished(ctx context.Context, crds dynamic.ResourceInterface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w (last error: %v)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
