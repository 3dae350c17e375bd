package simulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ARC's scale-set mode runs one listener pod per scale set: ARC's own listener process, with
// its configuration (the scale set, the GitHub credential) in a Secret mounted as a volume and
// LISTENER_CONFIG_PATH naming the file. The simulator plays that pod as a kubelet would, with
// the real process: it writes the Secret's files into a directory of the pod's own, points
// LISTENER_CONFIG_PATH there, and gives the process the pod's ServiceAccount credential where
// the listener reads it, the fixed in-cluster path. That path cannot be redirected by
// configuration, so the process runs in a private mount namespace (unshare, as root) with a
// token the API server issued for the ServiceAccount (TokenRequest, as the kubelet gets one)
// and the API server's CA bind-mounted there; nothing of ARC is changed. The pod ends as the
// process does: Succeeded on exit code 0, otherwise Failed with its exit code.

const (
	labelKubernetesComponent   = "app.kubernetes.io/component"
	arcListenerComponent       = "runner-scale-set-listener"
	envListenerConfigPath      = "LISTENER_CONFIG_PATH"
	inClusterServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// listenerStopGrace is how long a deleted listener pod's process has between SIGTERM and
	// SIGKILL, the kubelet's default termination grace period.
	listenerStopGrace = 30 * time.Second
)

// ARCListener tells the simulator how to run ARC's listener pods.
type ARCListener struct {
	// Binary is ARC's listener (gha-runner-scale-set's cmd/ghalistener).
	Binary string
	// APIServerHost and APIServerPort are what the kubelet passes a pod as
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT; CA is the API server's CA
	// certificate (PEM).
	APIServerHost, APIServerPort string
	CA                           []byte
	// Dir holds each listener pod's files and its process's log.
	Dir string
}

func isARCListenerPod(pod *corev1.Pod) bool {
	return pod.Labels[labelKubernetesComponent] == arcListenerComponent
}

func arcListenerPodSelector() (string, error) {
	r, err := labels.NewRequirement(labelKubernetesComponent, selection.Equals, []string{arcListenerComponent})
	if err != nil {
		return "", err
	}
	return labels.NewSelector().Add(*r).String(), nil
}

// listenerLifecycle runs a listener pod's process until it exits or the pod is deleted.
func (r *runner) listenerLifecycle(pod *corev1.Pod) *termination {
	if !r.retry("binding the pod", func() error { return r.s.bind(r.work, r.ref, pod.Spec.NodeName) }) {
		return nil
	}
	cmd, err := r.waitForListenerCommand(pod)
	if cmd == nil {
		if err != nil {
			return &termination{phase: corev1.PodFailed, exitCode: 1, message: err.Error()}
		}
		return nil
	}
	if !r.retry("setting the pod Running", func() error { return r.s.markRunning(r.work, r.ref) }) {
		return nil
	}
	if err := cmd.Start(); err != nil {
		return &termination{phase: corev1.PodFailed, exitCode: 128, message: "starting the listener: " + err.Error()}
	}
	r.log.Info("listener started", "pid", cmd.Process.Pid)
	err = cmd.Wait()
	if r.work.Err() != nil {
		return nil // deleted or the simulator stopped: the process was stopped with the pod
	}
	code := cmd.ProcessState.ExitCode()
	r.log.Info("listener exited", "exitCode", code, "error", err)
	if code == 0 {
		return &termination{phase: corev1.PodSucceeded}
	}
	return &termination{phase: corev1.PodFailed, exitCode: int32(max(code, 1)), message: "the listener exited"}
}

// waitForListenerCommand prepares the pod's process, waiting (CreateContainerConfigError) while
// its Secret or ServiceAccount is not there yet. A pod that cannot run at all answers an error.
func (r *runner) waitForListenerCommand(pod *corev1.Pod) (*exec.Cmd, error) {
	for {
		cmd, err := r.listenerCommand(pod)
		if err == nil || r.work.Err() != nil {
			return cmd, nil
		}
		var bad badListenerPod
		if errors.As(err, &bad) {
			return nil, err
		}
		r.log.Warn("listener not ready to start", "error", err)
		if err := r.s.markWaiting(r.work, r.ref, "CreateContainerConfigError", err.Error()); err != nil {
			r.logUnlessStopped("could not set the container waiting", err)
		}
		if !r.pause(retryDelay) {
			return nil, nil
		}
	}
}

// badListenerPod is a listener pod the simulator cannot run, whatever it waits for.
type badListenerPod string

func (b badListenerPod) Error() string { return string(b) }

// listenerCommand writes the pod's config volume and ServiceAccount credential and builds the
// process, in the environment the pod's container declares (literal values).
func (r *runner) listenerCommand(pod *corev1.Pod) (*exec.Cmd, error) {
	cfg := r.s.cfg.ARCListener
	if len(pod.Spec.Containers) != 1 {
		return nil, badListenerPod(fmt.Sprintf("a listener pod has one container, this one %d", len(pod.Spec.Containers)))
	}
	container := pod.Spec.Containers[0]
	dir := filepath.Join(cfg.Dir, pod.Namespace+"-"+pod.Name+"-"+string(pod.UID)[:8])
	env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"KUBERNETES_SERVICE_HOST=" + cfg.APIServerHost, "KUBERNETES_SERVICE_PORT=" + cfg.APIServerPort}
	mounts, err := r.writeSecretVolumes(pod, container, filepath.Join(dir, "volumes"))
	if err != nil {
		return nil, err
	}
	for _, e := range container.Env {
		if e.ValueFrom != nil {
			return nil, badListenerPod("the listener's environment takes only values, not " + e.Name)
		}
		v := e.Value
		if e.Name == envListenerConfigPath {
			v = relocate(v, mounts)
		}
		env = append(env, e.Name+"="+v)
	}
	saDir := filepath.Join(dir, "serviceaccount")
	if err := r.writeServiceAccount(pod, saDir); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(dir, "listener.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	// unshare execs sh, which execs the listener: the process waited for is the listener.
	script := `set -e; d=` + inClusterServiceAccountDir + `; mount -t tmpfs tmpfs "$(readlink -f /var/run)"; ` +
		`mkdir -p "$d"; mount --bind "$1" "$d"; exec "$2"`
	cmd := exec.CommandContext(r.work, "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "listener", saDir, cfg.Binary)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = listenerStopGrace
	return cmd, nil
}

// writeSecretVolumes writes the files of every Secret volume the container mounts into a
// directory per volume, and answers mount path → directory.
func (r *runner) writeSecretVolumes(pod *corev1.Pod, c corev1.Container, root string) (map[string]string, error) {
	secrets := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		name, ok := secrets[m.Name]
		if !ok {
			continue
		}
		secret, err := r.s.cfg.Client.CoreV1().Secrets(pod.Namespace).Get(r.work, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("secret %q of volume %s: %w", name, m.Name, err)
		}
		dir := filepath.Join(root, m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		for key, data := range secret.Data {
			if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
				return nil, err
			}
		}
		mounts[m.MountPath] = dir
	}
	return mounts, nil
}

// relocate maps a path inside a mounted volume to where the volume's files were written.
func relocate(path string, mounts map[string]string) string {
	for mount, dir := range mounts {
		if rest, ok := strings.CutPrefix(path, strings.TrimSuffix(mount, "/")+"/"); ok {
			return filepath.Join(dir, rest)
		}
	}
	return path
}

// writeServiceAccount writes what the kubelet mounts at the in-cluster path: a token for the
// pod's ServiceAccount, bound to the pod, and the API server's CA.
func (r *runner) writeServiceAccount(pod *corev1.Pod, dir string) error {
	if pod.Spec.ServiceAccountName == "" {
		return badListenerPod("the listener pod names no ServiceAccount")
	}
	ca := r.s.cfg.ARCListener.CA
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	ctx, cancel := context.WithTimeout(r.work, 10*time.Second)
	defer cancel()
	tr, err := r.s.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for service account %s: %w", pod.Spec.ServiceAccountName, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(pod.Namespace)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
