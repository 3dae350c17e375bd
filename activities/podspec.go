package activities

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/workflows"
)

// buildRunnerPod turns a pool's pod template into one runner's pod: runnerflow's labels and
// annotations (so the pod watcher, the simulator and operators can trace it to its workflow),
// RestartPolicy Never (a finished runner is done, not restarted), the credential from the
// runner's Secret, and the slot's volume claims. The template is never modified.
func buildRunnerPod(in workflows.CreateRunnerPodInput) (*corev1.Pod, error) {
	if in.Name == "" || in.Namespace == "" || in.WorkflowID == "" || in.SecretName == "" {
		return nil, errors.New("pod needs a name, namespace, workflow id and secret name")
	}
	tmpl := in.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.Name,
			Namespace:   in.Namespace,
			Labels:      maps.Clone(tmpl.Labels),
			Annotations: maps.Clone(tmpl.Annotations),
		},
		Spec: tmpl.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Labels[runnerpod.LabelManagedBy] = runnerpod.ManagedByValue
	pod.Labels[runnerpod.LabelPool] = in.Pool
	pod.Labels[runnerpod.LabelRunner] = in.Name
	pod.Annotations[runnerpod.AnnotationWorkflowID] = in.WorkflowID
	pod.Annotations[runnerpod.AnnotationTemplateHash] = in.TemplateHash
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if in.SecretAfterScheduling {
		// The pod watcher reports this pod's scheduling and start: its Secret follows them.
		pod.Annotations[runnerpod.AnnotationSecretAfterScheduling] = "true"
	}
	if in.SecretUID != "" {
		// The credential owns the pod: deleting the Secret ends the runner, and the cluster's
		// garbage collector takes the pod with it (background propagation).
		pod.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Secret", Name: in.SecretName, UID: types.UID(in.SecretUID),
		}}
	}

	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == runnerpod.RunnerContainerName })
	if i < 0 {
		return nil, fmt.Errorf("pod template has no container named %q", runnerpod.RunnerContainerName)
	}
	env, err := runnerEnv(in)
	if err != nil {
		return nil, err
	}
	c := &pod.Spec.Containers[i]
	// Ours replace any template entry of the same name: the credential must come from the Secret.
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
		return slices.ContainsFunc(env, func(o corev1.EnvVar) bool { return o.Name == e.Name })
	})
	c.Env = append(c.Env, env...)
	if err := bindSlotVolumes(&pod.Spec, in.SlotVolumes); err != nil {
		return nil, err
	}
	return pod, nil
}

// runnerEnv is how the actions runner image learns its credential and, in registration-token
// mode, its settings.
func runnerEnv(in workflows.CreateRunnerPodInput) ([]corev1.EnvVar, error) {
	fromSecret := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: in.SecretName}, Key: key,
		}}}
	}
	switch in.Mode {
	case workflows.RegistrationJIT:
		return []corev1.EnvVar{fromSecret(runnerpod.EnvJITConfig, runnerpod.SecretKeyJITConfig)}, nil
	case workflows.RegistrationToken:
	default:
		return nil, fmt.Errorf("unknown registration mode %q", in.Mode)
	}
	if in.RunnerURL == "" {
		return nil, errors.New("registration-token mode needs the runner URL")
	}
	env := []corev1.EnvVar{
		fromSecret(runnerpod.EnvRegistrationToken, runnerpod.SecretKeyRegistrationToken),
		{Name: runnerpod.EnvRunnerName, Value: in.Name},
		{Name: runnerpod.EnvRunnerURL, Value: in.RunnerURL},
		{Name: runnerpod.EnvRunnerLabels, Value: strings.Join(in.Labels, ",")},
		{Name: runnerpod.EnvRunnerEphemeral, Value: strconv.FormatBool(in.Ephemeral)},
	}
	if in.RunnerGroup != "" {
		env = append(env, corev1.EnvVar{Name: runnerpod.EnvRunnerGroup, Value: in.RunnerGroup})
	}
	if in.WorkFolder != "" {
		env = append(env, corev1.EnvVar{Name: runnerpod.EnvRunnerWorkDir, Value: in.WorkFolder})
	}
	return env, nil
}

// bindSlotVolumes points the named volumes at the slot's persistent volume claims, replacing
// whatever source the template gave them (typically an emptyDir placeholder).
func bindSlotVolumes(spec *corev1.PodSpec, slots []workflows.SlotVolume) error {
	for _, sv := range slots {
		if sv.VolumeName == "" || sv.ClaimName == "" {
			return fmt.Errorf("slot volume %+v needs a volume name and a claim name", sv)
		}
		src := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: sv.ClaimName}}
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == sv.VolumeName })
		if i < 0 {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: sv.VolumeName, VolumeSource: src})
			continue
		}
		spec.Volumes[i].VolumeSource = src
	}
	return nil
}
