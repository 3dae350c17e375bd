package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// A runner on a named cluster that stops answering for good (changeClusterLost): while it
// never came online it ran no job, so past ClusterLostAfter it leaves the cluster and its pool
// places another runner on one that answers.

// podView is what the registration check makes of its pod read. A pod on a named cluster that
// no read has reached for ClusterLostAfter is on a lost cluster (changeClusterLost); the
// default cluster is the one the workers run beside, with no other to hand a job to.
func (r *runner) podView(ctx workflow.Context, podRead bool, now time.Time) podView {
	v := viewOfPod(r.obs.PodPhase, r.obs.PodDeleting, podRead)
	if v == podUnreadable && clusterLost(r.in.Cluster, r.obs.PodUnreadSince, now) &&
		workflow.GetVersion(ctx, changeClusterLost, workflow.DefaultVersion, 1) >= 1 {
		return podClusterLost
	}
	return v
}

// clusterLost reports whether a named cluster whose pod reads have failed since unreadSince
// is taken as lost at now.
func clusterLost(cluster string, unreadSince, now time.Time) bool {
	return cluster != "" && !unreadSince.IsZero() && !now.Before(unreadSince.Add(ClusterLostAfter))
}

// leaveLostCluster ends a runner whose cluster is lost (changeClusterLost): it never came
// online, so it ran no job. GitHub's registration goes first (removal keeps its 422 guard),
// then the pool hears the runner failed, and places another runner on a cluster that answers;
// the Secret (and with it the pod) is deleted when the cluster answers again.
func (r *runner) leaveLostCluster(ctx workflow.Context, end ending) (RunnerResult, error) {
	r.log.Warn("Runner's cluster is lost; leaving it for its pool to place another runner", "cluster", r.in.Cluster, "reason", end.reason)
	r.obs.setBusy(false)
	if r.registered && !end.githubDone {
		if _, err := removeRunner(ctx, r.runnerRef()); err != nil {
			return r.fail(ctx, fmt.Errorf("remove runner from GitHub: %w", err))
		}
	}
	secretUnheard := r.secretWriteUnheard()
	r.registered = false
	reason := ClusterLostReason + ": " + end.reason
	r.setState(ctx, RunnerFailed, reason)
	r.cleaningUp = true
	if err := r.deleteWhenClusterReturns(ctx, secretUnheard); err != nil {
		r.log.Error("Cannot remove the runner's objects from its lost cluster", "cluster", r.in.Cluster, "error", err)
	}
	r.drainSignals()
	return r.result(), temporal.NewNonRetryableApplicationError(reason, ErrRunnerFailed, nil)
}

// changeLostSecretByName gates deleting by name, when a runner leaves a lost cluster, the
// Secret of a credential step that failed mid-step (secretWriteUnheard).
const changeLostSecretByName = "lost-cluster-secret-by-name"

// secretWriteUnheard reports whether the runner's Secret may exist though the runner never
// heard it written: a pod-first registration failed after GitHub registered the runner (the
// runner counts as registered without a registration), and the Secret's write may have
// reached the API server before it stopped answering. The Secret is named after the runner.
func (r *runner) secretWriteUnheard() bool {
	return r.registered && r.reg.SecretName == "" && r.obs.Credential != CredentialSpent
}

// deleteWhenClusterReturns deletes the runner's Secret (its pod goes with it) or, for a pod
// the Secret does not own, the pod too, waiting for the cluster under ClusterReturnPolicy.
// secretUnheard: a Secret the runner never heard written is deleted by its name
// (changeLostSecretByName; none there is success).
func (r *runner) deleteWhenClusterReturns(ctx workflow.Context, secretUnheard bool) error {
	policy := ForCluster(ClusterReturnPolicy, r.in.Cluster)
	if r.podUID != "" && !r.secretOwnsPod() {
		if _, err := runActivity[PodRef, Nothing](ctx, policy, ActivityDeleteRunnerPod, r.podRef()); err != nil {
			return fmt.Errorf("delete runner pod: %w", err)
		}
	}
	r.podUID = ""
	if secretUnheard && workflow.GetVersion(ctx, changeLostSecretByName, workflow.DefaultVersion, 1) >= 1 {
		r.reg.SecretName = r.in.Name
	}
	if r.reg.SecretName != "" {
		if _, err := runActivity[SecretRef, Nothing](ctx, policy, ActivityDeleteRunnerSecret, r.secretRef()); err != nil {
			return fmt.Errorf("delete runner secret: %w", err)
		}
		r.reg.SecretName, r.reg.SecretUID = "", ""
	}
	return nil
}

// ClusterLostReason begins the reason of a runner that left a lost cluster (changeClusterLost).
const ClusterLostReason = "cluster lost"
