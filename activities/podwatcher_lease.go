package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/runnerflow/runnerflow/workflows"
)

// Every worker replica runs an ElectedPodWatcher, and one of them at a time runs the pod
// watcher: the one holding a coordination.k8s.io Lease, elected by client-go's leader election
// (workflows.PodWatcherLease* set its timings). The others stand by, reading the Lease, and
// one of them takes over when the leader releases it (a clean stop: within a retry period) or
// stops renewing it (a killed or cut-off leader: after the lease duration). Each term of
// leadership starts the informer afresh, with a full listing, so a pod whose run ended while
// nobody watched is signalled by the next leader; in steady state each pod's end is signalled
// once, by the leader alone.

// DefaultPodWatcherLeaseName is the Lease's name unless the worker is told another; two
// installations watching the same namespace need distinct names.
const DefaultPodWatcherLeaseName = "runnerflow-pod-watcher"

// PodWatcherLease is the Lease replicas campaign for and who is asking.
type PodWatcherLease struct {
	// Client reads and writes the Lease. Give it a client of its own: renewals must not queue
	// behind a burst of pod writes in a shared client's rate limiter, or the leader would lose
	// the Lease exactly when it is busiest.
	Client    kubernetes.Interface
	Namespace string
	// Name defaults to DefaultPodWatcherLeaseName.
	Name string
	// Identity is this replica's name in the Lease; empty means the host name (the pod's name
	// in a cluster) and a unique suffix, so a restarted pod is a new candidate.
	Identity string
	// Leader, when set, is kept at 1 while this replica leads and 0 otherwise.
	Leader prometheus.Gauge
}

// ElectedPodWatcher runs a PodWatcher only while this replica holds the Lease. Create it with
// NewElectedPodWatcher.
type ElectedPodWatcher struct {
	watcher *PodWatcher
	lease   PodWatcherLease
	log     *slog.Logger
}

// NewElectedPodWatcher checks lease and returns an elected watcher of w; Run starts it.
func NewElectedPodWatcher(w *PodWatcher, lease PodWatcherLease) (*ElectedPodWatcher, error) {
	if w == nil || lease.Client == nil || lease.Namespace == "" {
		return nil, errors.New("elected pod watcher needs a pod watcher, a Kubernetes client and the Lease's namespace")
	}
	if lease.Name == "" {
		lease.Name = DefaultPodWatcherLeaseName
	}
	if lease.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("pod watcher identity: %w", err)
		}
		lease.Identity = host + "_" + string(uuid.NewUUID())
	}
	return &ElectedPodWatcher{watcher: w, lease: lease,
		log: w.log.With("lease", lease.Namespace+"/"+lease.Name, "identity", lease.Identity)}, nil
}

// Identity is this replica's name in the Lease.
func (e *ElectedPodWatcher) Identity() string { return e.lease.Identity }

// Run campaigns for the Lease until ctx ends, watching pods during every term it holds it. It
// returns an error only if the pod watcher fails.
func (e *ElectedPodWatcher) Run(ctx context.Context) error {
	e.setLeader(false)
	for ctx.Err() == nil {
		if err := e.term(ctx); err != nil {
			return err
		}
	}
	return nil
}

// term waits until this replica leads, watches while it leads, and returns once it no longer
// does: the Lease was lost (it could not be renewed in time) or ctx ended. The watcher has
// stopped before the Lease is released, so the next leader's listing starts after this one's
// last signal.
func (e *ElectedPodWatcher) term(ctx context.Context) error {
	elected := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.lease.Namespace, Name: e.lease.Name},
			Client:     e.lease.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.lease.Identity},
		},
		LeaseDuration: workflows.PodWatcherLeaseDuration,
		RenewDeadline: workflows.PodWatcherLeaseRenewDeadline,
		RetryPeriod:   workflows.PodWatcherLeaseRetryPeriod,
		// A stopping replica hands over at once instead of making the next leader wait out
		// the lease duration: rolling deploys leave no gap.
		ReleaseOnCancel: true,
		Name:            e.lease.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) { elected <- leading },
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity != "" && identity != e.lease.Identity {
					e.log.Info("Pod watcher standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("pod watcher election: %w", err)
	}
	// The election outlives ctx by the time it takes the watcher to stop: ReleaseOnCancel
	// releases the Lease as soon as the election's context ends.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		elector.Run(electionCtx)
	}()
	defer func() {
		stopElection()
		<-electionDone
	}()
	var leading context.Context
	select {
	case <-ctx.Done():
		return nil
	case leading = <-elected:
	}
	watchCtx, stopWatching := context.WithCancel(leading)
	defer stopWatching()
	defer context.AfterFunc(ctx, stopWatching)()
	e.log.Info("Pod watcher leading")
	e.setLeader(true)
	defer e.setLeader(false)
	if err := e.watcher.Run(watchCtx); err != nil {
		return err
	}
	if ctx.Err() == nil {
		e.log.Warn("Pod watcher lost its Lease; standing by")
	}
	return nil
}

func (e *ElectedPodWatcher) setLeader(leading bool) {
	if e.lease.Leader == nil {
		return
	}
	if leading {
		e.lease.Leader.Set(1)
	} else {
		e.lease.Leader.Set(0)
	}
}
