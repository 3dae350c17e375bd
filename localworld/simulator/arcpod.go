package simulator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
)

// LabelARCRunner is the label actions-runner-controller (ARC, the benchmark's peer) puts on
// every runner pod it creates. The simulator plays those pods as it plays runnerflow's: ARC
// names the pod after its runner and passes a registration token, the runner's name, labels,
// group and ephemerality in the runner container's environment (plain values), which
// parseRunnerSpec reads; the runner registers through the double's registration-token flow,
// takes a job, and its pod Succeeds with the runner container terminated (exit code 0), which
// is how ARC sees an ephemeral runner finished. ARC never deletes its pods itself: the garbage
// collector does once their Runner is gone, and the pod's finalizer holds it until ARC has
// released the runner; the simulator's grace-0 final delete then completes with the finalizer.
const LabelARCRunner = "actions-runner"

// LabelARCEphemeralRunner is the label ARC's scale-set mode puts on the pod of every
// EphemeralRunner. The pod is named after the runner, and its runner container takes the JIT
// configuration from the EphemeralRunner's Secret (ACTIONS_RUNNER_INPUT_JITCONFIG), as
// runnerflow's JIT pods do; the simulator plays it the same way.
const LabelARCEphemeralRunner = "actions-ephemeral-runner"

// arcPodSelector selects ARC's runner pods of the summerwind mode.
func arcPodSelector() (string, error) { return labelExists(LabelARCRunner) }

// arcScaleSetPodSelector selects the runner pods of ARC's scale-set mode.
func arcScaleSetPodSelector() (string, error) { return labelExists(LabelARCEphemeralRunner) }

func labelExists(key string) (string, error) {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		return "", err
	}
	return labels.NewSelector().Add(*r).String(), nil
}

// runnerNameOf is the runner name of a pod: runnerflow's label, or for ARC's pods (which have
// none) the pod's name, which ARC gives its runner too.
func runnerNameOf(pod *corev1.Pod) string {
	if name := pod.Labels[runnerpod.LabelRunner]; name != "" {
		return name
	}
	if _, ok := pod.Labels[LabelARCRunner]; ok {
		return pod.Name
	}
	if _, ok := pod.Labels[LabelARCEphemeralRunner]; ok {
		return pod.Name
	}
	if isARCListenerPod(pod) {
		return pod.Name
	}
	return ""
}
