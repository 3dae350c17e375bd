package simulator

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

func fromSecret(env, name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key,
	}}}
}

func runnerPod(containerName string, env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{runnerpod.LabelRunner: "pool-abc"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Env: env}}},
	}
}

func TestParseRunnerSpec(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    runnerSpec
		wantErr string
	}{{
		name: "jit from secret",
		pod:  runnerPod("runner", fromSecret(runnerpod.EnvJITConfig, "s", "jitconfig")),
		want: runnerSpec{mode: modeJIT, credential: credentialSource{env: runnerpod.EnvJITConfig, secret: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "jitconfig"}}},
	}, {
		name: "jit wins over token",
		pod: runnerPod("runner", fromSecret(runnerpod.EnvRegistrationToken, "s", "token"),
			corev1.EnvVar{Name: runnerpod.EnvJITConfig, Value: "literal"}),
		want: runnerSpec{mode: modeJIT, credential: credentialSource{env: runnerpod.EnvJITConfig, literal: "literal"}},
	}, {
		name: "token with runner settings",
		pod: runnerPod("runner", fromSecret(runnerpod.EnvRegistrationToken, "s", "token"),
			corev1.EnvVar{Name: runnerpod.EnvRunnerName, Value: "r1"},
			corev1.EnvVar{Name: runnerpod.EnvRunnerLabels, Value: " linux, ,gpu ,"},
			corev1.EnvVar{Name: runnerpod.EnvRunnerGroup, Value: "builders"},
			corev1.EnvVar{Name: runnerpod.EnvRunnerEphemeral, Value: "true"}),
		want: runnerSpec{mode: modeToken, name: "r1", labels: []string{"linux", "gpu"}, group: "builders", ephemeral: true},
	}, {
		name: "token name defaults to the runner label",
		pod:  runnerPod("runner", fromSecret(runnerpod.EnvRegistrationToken, "s", "token")),
		want: runnerSpec{mode: modeToken, name: "pool-abc"},
	}, {
		name:    "no runner container",
		pod:     runnerPod("sidecar", fromSecret(runnerpod.EnvJITConfig, "s", "jitconfig")),
		wantErr: `no container named "runner"`,
	}, {
		name:    "no credential",
		pod:     runnerPod("runner", corev1.EnvVar{Name: runnerpod.EnvRunnerName, Value: "r1"}),
		wantErr: "sets neither",
	}, {
		name:    "secret ref without key",
		pod:     runnerPod("runner", fromSecret(runnerpod.EnvJITConfig, "s", "")),
		wantErr: "without name or key",
	}, {
		name: "credential from a config map",
		pod: runnerPod("runner", corev1.EnvVar{Name: runnerpod.EnvJITConfig, ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}),
		wantErr: "must come from a secretKeyRef",
	}, {
		name: "bad ephemeral flag",
		pod: runnerPod("runner", fromSecret(runnerpod.EnvRegistrationToken, "s", "token"),
			corev1.EnvVar{Name: runnerpod.EnvRunnerEphemeral, Value: "sometimes"}),
		wantErr: "is not a boolean",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRunnerSpec(tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.mode != tc.want.mode || got.name != tc.want.name || got.group != tc.want.group ||
				got.ephemeral != tc.want.ephemeral || !slices.Equal(got.labels, tc.want.labels) {
				t.Errorf("spec = %+v, want %+v", got, tc.want)
			}
			if tc.want.credential.env != "" && !sameSource(got.credential, tc.want.credential) {
				t.Errorf("credential = %+v, want %+v", got.credential, tc.want.credential)
			}
		})
	}
}

func sameSource(a, b credentialSource) bool {
	if a.env != b.env || a.literal != b.literal || (a.secret == nil) != (b.secret == nil) {
		return false
	}
	return a.secret == nil || *a.secret == *b.secret
}

func TestFaultFromAnnotationAndSetFault(t *testing.T) {
	s := New(Config{})
	ann := map[string]string{AnnotationFault: string(FaultEvict)}
	if f := s.faultFor("r", ann); f != FaultEvict {
		t.Errorf("annotation fault = %q, want %q", f, FaultEvict)
	}
	s.SetFault("r", FaultCrashMidJob)
	if f := s.faultFor("r", ann); f != FaultCrashMidJob {
		t.Errorf("SetFault did not take precedence: %q", f)
	}
	s.SetFault("r", FaultNone)
	if f := s.faultFor("r", map[string]string{AnnotationFault: "explode"}); f != FaultNone {
		t.Errorf("unknown fault annotation = %q, want none", f)
	}
}

func TestWorkDurationAnnotation(t *testing.T) {
	s := New(Config{WorkDuration: 3e9})
	if d := s.workDuration("r", nil); d != 3e9 {
		t.Errorf("default work duration = %v", d)
	}
	if d := s.workDuration("r", map[string]string{AnnotationWorkDuration: "250ms"}); d.Milliseconds() != 250 {
		t.Errorf("annotated work duration = %v, want 250ms", d)
	}
	if d := s.workDuration("r", map[string]string{AnnotationWorkDuration: "soon"}); d != 3e9 {
		t.Errorf("invalid annotation gave %v, want the default", d)
	}
}

func TestRunRefusesMissingClients(t *testing.T) {
	if err := New(Config{}).Run(t.Context()); err == nil {
		t.Error("Run without a client and a GitHub double succeeded")
	}
}
