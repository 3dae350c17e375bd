package testworld

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ARC's scale-set mode (AutoscalingRunnerSet, a listener pod per set, EphemeralRunnerSet and
// EphemeralRunner), the peer GitHub recommends today, as its users run it: the
// gha-runner-scale-set release ARCScaleSetVersion, whose manager and listener speak to GitHub
// through github.com/actions/scaleset. scripts/tools.sh builds both from the release's source
// (which the module proxy does not serve), so they may be absent: ARCScaleSetTools says so.
// The manager runs with --auto-scaling-runner-set-only and creates each set's listener pod with
// the listener's configuration in a Secret; nothing runs that pod but the runner simulator,
// which starts ARC's listener process for it (simulator.ARCListener).

// ARCScaleSetVersion is the gha-runner-scale-set release scripts/tools.sh builds: the version
// its binaries report and the one an AutoscalingRunnerSet must be labelled with.
const ARCScaleSetVersion = "0.14.2"

// The scale-set mode's tools in bin/, built by `scripts/tools.sh arc` from the release's source.
const (
	ARCScaleSetManagerTool  = "arc-gha-controller-manager"
	ARCScaleSetListenerTool = "arc-gha-listener"
	ARCScaleSetCRDsTool     = "arc-gha-crds.yaml"
)

// ARCScaleSetTools reports whether the scale-set mode's tools are built; if not, the error says
// how to get them.
func ARCScaleSetTools() error {
	for _, tool := range []string{ARCScaleSetManagerTool, ARCScaleSetListenerTool, ARCScaleSetCRDsTool} {
		if _, err := ToolPath(tool); err != nil {
			return fmt.Errorf("actions-runner-controller gha-runner-scale-set %s is not built (%w); its source is not served by the module proxy: "+
				"git clone --branch gha-runner-scale-set-%s https://github.com/actions/actions-runner-controller, "+
				"name the checkout in RUNNERFLOW_ARC_SCALESET_SRC and run scripts/tools.sh arc", ARCScaleSetVersion, err, ARCScaleSetVersion)
		}
	}
	return nil
}

// ARCScaleSetGroupVersion is the API of the scale-set mode's resources.
var ARCScaleSetGroupVersion = schema.GroupVersion{Group: "actions.github.com", Version: "v1alpha1"}

// ARCScaleSetListenerImage is the image ARC is told its listener pods run
// (CONTROLLER_MANAGER_CONTAINER_IMAGE); no image is pulled here, the simulator runs the
// listener binary for such a pod.
const ARCScaleSetListenerImage = "ghcr.io/actions/gha-runner-scale-set-controller:" + ARCScaleSetVersion

// InstallARCScaleSetCRDs creates the scale-set mode's actions.github.com CRDs from the module
// release ARC was built from (bin/arc-gha-crds.yaml) and waits until they are served.
func InstallARCScaleSetCRDs(ctx context.Context, cfg *rest.Config) error {
	return installCRDs(ctx, cfg, ARCScaleSetCRDsTool)
}

// ARCScaleSetOptions configures StartARCScaleSet.
type ARCScaleSetOptions struct {
	// Kube is the cluster; the scale-set CRDs must be installed (InstallARCScaleSetCRDs).
	Kube *Kube
	// Namespace is the one namespace the manager watches and runs its listeners in (the
	// manager's own namespace, CONTROLLER_MANAGER_POD_NAMESPACE).
	Namespace string
	// Dir holds the manager's log and serving certificate; empty means "arc-scaleset" under the
	// cluster's Dir.
	Dir string
	// RunnerMaxConcurrentReconciles is the EphemeralRunner controller's concurrency
	// (--runner-max-concurrent-reconciles); KubeQPS and KubeBurst the manager's Kubernetes
	// client limits (--k8s-client-rate-limiter-qps, -burst). Zero keeps ARC's defaults, which
	// are its chart's: 2, 20 and 30.
	RunnerMaxConcurrentReconciles, KubeQPS, KubeBurst int
}

// ARCScaleSet is ARC's controller manager running the scale-set mode.
type ARCScaleSet struct {
	Dir string

	proc     *process
	stopOnce sync.Once
	stopErr  error
}

// StartARCScaleSet starts the controller manager in scale-set mode and returns once its four
// controllers run. Its listeners serve no metrics (--listener-metrics-addr=0): every listener
// would bind the same port on this one host.
func StartARCScaleSet(ctx context.Context, opts ARCScaleSetOptions) (_ *ARCScaleSet, err error) {
	bin, err := ToolPath(ARCScaleSetManagerTool)
	if err != nil {
		return nil, err
	}
	if opts.Kube == nil || opts.Namespace == "" {
		return nil, errors.New("testworld: ARCScaleSetOptions needs Kube and Namespace")
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(opts.Kube.Dir, "arc-scaleset")
	}
	tmp := filepath.Join(opts.Dir, "tmp")
	if err := writeServingCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs")); err != nil {
		return nil, err
	}
	kubeconfig, err := opts.Kube.kubeconfigOf(ARCControllerUser)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	metrics := "127.0.0.1:" + strconv.Itoa(ports[0])
	env := append(baseEnv(opts.Dir), "TMPDIR="+tmp, "KUBECONFIG="+kubeconfig,
		"CONTROLLER_MANAGER_POD_NAMESPACE="+opts.Namespace,
		"CONTROLLER_MANAGER_CONTAINER_IMAGE="+ARCScaleSetListenerImage)
	args := []string{
		"--auto-scaling-runner-set-only",
		"--watch-namespace=" + opts.Namespace,
		"--metrics-addr=" + metrics,
		"--listener-metrics-addr=0",
		"--port=" + strconv.Itoa(ports[1]),
		"--log-level=debug",
		"--log-format=json",
	}
	for flag, v := range map[string]int{"--runner-max-concurrent-reconciles": opts.RunnerMaxConcurrentReconciles,
		"--k8s-client-rate-limiter-qps": opts.KubeQPS, "--k8s-client-rate-limiter-burst": opts.KubeBurst} {
		if v > 0 {
			args = append(args, flag+"="+strconv.Itoa(v))
		}
	}
	p, err := startProcessWithEnv(opts.Dir, "arc-scaleset-controller-manager", bin, env, args...)
	if err != nil {
		return nil, err
	}
	a := &ARCScaleSet{Dir: opts.Dir, proc: p}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Stop())
		}
	}()
	if err := waitHTTP(ctx, p, "http://"+metrics+"/metrics"); err != nil {
		return nil, err
	}
	for _, kind := range []string{"AutoscalingRunnerSet", "EphemeralRunnerSet", "EphemeralRunner", "AutoscalingListener"} {
		if err := waitForLogLine(ctx, p, "Starting workers", `"controllerKind":"`+kind+`"`); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, a.LogTail())
		}
	}
	return a, nil
}

// Stop kills the manager and waits for it to exit. It is safe to call more than once.
func (a *ARCScaleSet) Stop() error {
	a.stopOnce.Do(func() { a.stopErr = a.proc.kill() })
	return a.stopErr
}

// LogTail returns the end of the manager's log, for a failure report.
func (a *ARCScaleSet) LogTail() string {
	return fmt.Sprintf("--- %s (%s) ---\n%s\n", a.proc.name, a.proc.logPath, tail(a.proc.logPath, 8192))
}

// ARCScaleSetSpec describes one AutoscalingRunnerSet.
type ARCScaleSetSpec struct {
	Namespace, Name string
	// ConfigURL is the organization's or repository's URL at GitHub (the double's URL and
	// "acme"); Token a personal access token the double accepts, put in the set's Secret.
	ConfigURL, Token string
	MinRunners       int
	MaxRunners       int
	// Labels are the set's labels besides its name (runnerScaleSetLabels, since
	// gha-runner-scale-set 0.14); a job whose runs-on they and the name cover reaches the set.
	Labels []string
}

// CreateARCScaleSet creates the set's GitHub Secret and its AutoscalingRunnerSet, labelled
// with the version ARC was built as (a set of another version is deleted by ARC). Its runner
// template is the runner image's ("runner" container running run.sh), which the simulator
// plays. Jobs reach it with runs-on set to the set's name.
func CreateARCScaleSet(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, spec ARCScaleSetSpec) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name + "-github", Namespace: spec.Namespace},
		Data:       map[string][]byte{"github_token": []byte(spec.Token)},
	}
	if _, err := client.CoreV1().Secrets(spec.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the scale set's secret: %w", err)
	}
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ARCScaleSetGroupVersion.String(),
		"kind":       "AutoscalingRunnerSet",
		"metadata": map[string]any{
			"name": spec.Name, "namespace": spec.Namespace,
			"labels": map[string]any{"app.kubernetes.io/version": ARCScaleSetVersion},
		},
		"spec": map[string]any{
			"githubConfigUrl":      strings.TrimSuffix(spec.ConfigURL, "/"),
			"githubConfigSecret":   secret.Name,
			"minRunners":           int64(spec.MinRunners),
			"maxRunners":           int64(spec.MaxRunners),
			"runnerScaleSetLabels": anySlice(spec.Labels),
			"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers": []any{map[string]any{
					"name": "runner", "image": "ghcr.io/actions/actions-runner:latest",
					"command": []any{"/home/runner/run.sh"},
				}},
			}},
		},
	}}
	sets := dyn.Resource(ARCScaleSetGroupVersion.WithResource("autoscalingrunnersets")).Namespace(spec.Namespace)
	if _, err := sets.Create(ctx, set, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create AutoscalingRunnerSet %s: %w", spec.Name, err)
	}
	return nil
}

// InClusterEndpoint is what the kubelet tells a pod of the API server: its host and port
// (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT) and CA certificate (PEM).
func (k *Kube) InClusterEndpoint() (host, port string, ca []byte) {
	return "127.0.0.1", strconv.Itoa(k.port), k.caPEM
}

// anySlice is a string list as unstructured objects hold one.
func anySlice(values []string) []any {
	out := make([]any, 0, len(values))
	for _, v := range values {
		out = append(out, v)
	}
	return out
}
