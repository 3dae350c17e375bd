package activities

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

func podInput(mode workflows.RegistrationMode) workflows.CreateRunnerPodInput {
	return workflows.CreateRunnerPodInput{
		Pool: "pool-a", Name: "pool-a-ab12-1", WorkflowID: "runner/pool-a/pool-a-ab12-1", Namespace: "runners",
		TemplateHash: "h1", SecretName: "pool-a-ab12-1", Mode: mode,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "ci", runnerpod.LabelPool: "spoofed"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways,
				Containers: []corev1.Container{
					{Name: "sidecar", Image: "dind"},
					{Name: "runner", Image: "runner", Env: []corev1.EnvVar{
						{Name: "KEEP", Value: "1"}, {Name: runnerpod.EnvJITConfig, Value: "literal-from-template"},
					}},
				},
				Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			},
		},
	}
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := out[e.Name]; dup {
			out[e.Name+"#dup"] = e
		}
		out[e.Name] = e
	}
	return out
}

func TestBuildRunnerPodJIT(t *testing.T) {
	in := podInput(workflows.RegistrationJIT)
	in.SlotVolumes = []workflows.SlotVolume{{VolumeName: "work", ClaimName: "pool-a-slot-0"}, {VolumeName: "cache", ClaimName: "pool-a-cache-0"}}
	pod, err := buildRunnerPod(in)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != in.Name || pod.Namespace != in.Namespace || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod %s/%s restart %s", pod.Namespace, pod.Name, pod.Spec.RestartPolicy)
	}
	wantLabels := map[string]string{"team": "ci", runnerpod.LabelPool: "pool-a", runnerpod.LabelRunner: in.Name,
		runnerpod.LabelManagedBy: runnerpod.ManagedByValue}
	for k, v := range wantLabels {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Annotations[runnerpod.AnnotationWorkflowID] != in.WorkflowID || pod.Annotations[runnerpod.AnnotationTemplateHash] != "h1" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	env := envOf(pod.Spec.Containers[1])
	jit := env[runnerpod.EnvJITConfig]
	if _, dup := env[runnerpod.EnvJITConfig+"#dup"]; dup || jit.Value != "" || jit.ValueFrom == nil ||
		jit.ValueFrom.SecretKeyRef.Name != in.SecretName || jit.ValueFrom.SecretKeyRef.Key != runnerpod.SecretKeyJITConfig {
		t.Errorf("JIT env = %+v, want one entry from the secret", jit)
	}
	if env["KEEP"].Value != "1" || len(pod.Spec.Containers[0].Env) != 0 {
		t.Errorf("template env not kept or sidecar touched: %+v", pod.Spec.Containers)
	}
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "pool-a-slot-0" ||
		pod.Spec.Volumes[1].PersistentVolumeClaim.ClaimName != "pool-a-cache-0" {
		t.Errorf("volumes = %+v", pod.Spec.Volumes)
	}
	// The pool's template is shared by every runner: it must not change.
	if in.Template.Spec.Volumes[0].EmptyDir == nil || in.Template.Labels[runnerpod.LabelPool] != "spoofed" ||
		len(in.Template.Spec.Containers[1].Env) != 2 || in.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Error("building the pod modified the template")
	}
}

func TestBuildRunnerPodToken(t *testing.T) {
	in := podInput(workflows.RegistrationToken)
	in.RunnerURL, in.Labels, in.RunnerGroup, in.WorkFolder = "https://github.com/acme", []string{"linux", "x64"}, "gpu", "/work"
	pod, err := buildRunnerPod(in)
	if err != nil {
		t.Fatal(err)
	}
	env := envOf(pod.Spec.Containers[1])
	if tok := env[runnerpod.EnvRegistrationToken]; tok.ValueFrom == nil || tok.ValueFrom.SecretKeyRef.Key != runnerpod.SecretKeyRegistrationToken {
		t.Errorf("token env = %+v", tok)
	}
	for name, want := range map[string]string{
		runnerpod.EnvRunnerName: in.Name, runnerpod.EnvRunnerURL: in.RunnerURL, runnerpod.EnvRunnerLabels: "linux,x64",
		runnerpod.EnvRunnerEphemeral: "false", runnerpod.EnvRunnerGroup: "gpu", runnerpod.EnvRunnerWorkDir: "/work",
	} {
		if env[name].Value != want {
			t.Errorf("%s = %q, want %q", name, env[name].Value, want)
		}
	}
}

func TestBuildRunnerPodRejectsBadInput(t *testing.T) {
	noRunner := podInput(workflows.RegistrationJIT)
	noRunner.Template.Spec.Containers = noRunner.Template.Spec.Containers[:1]
	noURL := podInput(workflows.RegistrationToken)
	badSlot := podInput(workflows.RegistrationJIT)
	badSlot.SlotVolumes = []workflows.SlotVolume{{VolumeName: "work"}}
	badMode := podInput("magic")
	for name, in := range map[string]workflows.CreateRunnerPodInput{
		`no container named "runner"`: noRunner, "runner URL": noURL, "claim name": badSlot, "registration mode": badMode,
	} {
		if _, err := buildRunnerPod(in); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error = %v, want it to mention %q", err, name)
		}
	}
}
