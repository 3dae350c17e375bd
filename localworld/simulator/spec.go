package simulator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// credentialMode is how the runner authenticates to GitHub.
type credentialMode int

const (
	// modeJIT: ACTIONS_RUNNER_INPUT_JITCONFIG carries an encoded just-in-time configuration.
	modeJIT credentialMode = iota + 1
	// modeToken: RUNNER_TOKEN carries a registration token and RUNNER_* describe the runner.
	modeToken
)

// credentialSource is where the kubelet would take the credential's environment value from:
// a Secret key (how runnerflow writes it) or a literal value.
type credentialSource struct {
	env     string
	secret  *corev1.SecretKeySelector
	literal string
}

// runnerSpec is what the runner container's environment tells the runner process.
type runnerSpec struct {
	mode       credentialMode
	credential credentialSource
	// Registration-token mode only; a JIT configuration carries these itself.
	name      string
	labels    []string
	group     string
	ephemeral bool
}

// parseRunnerSpec reads the runner container's environment the way the runner image's
// entrypoint does: a JIT configuration wins over a registration token.
func parseRunnerSpec(pod *corev1.Pod) (runnerSpec, error) {
	var container *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == runnerpod.RunnerContainerName {
			container = &pod.Spec.Containers[i]
		}
	}
	if container == nil {
		return runnerSpec{}, fmt.Errorf("pod has no container named %q", runnerpod.RunnerContainerName)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range container.Env {
		env[e.Name] = e // the last definition wins, as in the kubelet
	}
	if e, ok := env[runnerpod.EnvJITConfig]; ok {
		src, err := credentialFrom(e)
		return runnerSpec{mode: modeJIT, credential: src}, err
	}
	e, ok := env[runnerpod.EnvRegistrationToken]
	if !ok {
		return runnerSpec{}, fmt.Errorf("container %q sets neither %s nor %s",
			runnerpod.RunnerContainerName, runnerpod.EnvJITConfig, runnerpod.EnvRegistrationToken)
	}
	src, err := credentialFrom(e)
	if err != nil {
		return runnerSpec{}, err
	}
	spec := runnerSpec{mode: modeToken, credential: src, group: env[runnerpod.EnvRunnerGroup].Value}
	spec.name = env[runnerpod.EnvRunnerName].Value
	if spec.name == "" {
		spec.name = runnerNameOf(pod)
	}
	spec.labels = splitLabels(env[runnerpod.EnvRunnerLabels].Value)
	if v := env[runnerpod.EnvRunnerEphemeral].Value; v != "" {
		if spec.ephemeral, err = strconv.ParseBool(v); err != nil {
			return runnerSpec{}, fmt.Errorf("%s=%q is not a boolean", runnerpod.EnvRunnerEphemeral, v)
		}
	}
	return spec, nil
}

func credentialFrom(e corev1.EnvVar) (credentialSource, error) {
	switch {
	case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name == "" || ref.Key == "" {
			return credentialSource{}, fmt.Errorf("%s refers to a secret without name or key", e.Name)
		}
		return credentialSource{env: e.Name, secret: ref}, nil
	case e.ValueFrom != nil:
		return credentialSource{}, fmt.Errorf("%s must come from a secretKeyRef", e.Name)
	case e.Value == "":
		return credentialSource{}, fmt.Errorf("%s is empty", e.Name)
	}
	return credentialSource{env: e.Name, literal: e.Value}, nil
}

// splitLabels splits RUNNER_LABELS ("linux, x64") into trimmed, non-empty labels.
func splitLabels(v string) []string {
	var out []string
	for _, l := range strings.Split(v, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// readCredential resolves the credential as the kubelet resolves the environment variable.
// Errors name the secret and key, never the value.
func (s *Simulator) readCredential(ctx context.Context, namespace string, c credentialSource) (string, error) {
	if c.secret == nil {
		return c.literal, nil
	}
	var secret *corev1.Secret
	var err error
	if l := s.secretLister(namespace); l != nil {
		secret, err = l.Secrets(namespace).Get(c.secret.Name)
	} else {
		secret, err = s.cfg.Client.CoreV1().Secrets(namespace).Get(ctx, c.secret.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("secret %q for %s: %w", c.secret.Name, c.env, err)
	}
	v, ok := secret.Data[c.secret.Key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("couldn't find key %s in Secret %s/%s", c.secret.Key, namespace, c.secret.Name)
	}
	return string(v), nil
}
