package workerapp

import (
	"context"
	"fmt"
	"os"

	"go.temporal.io/sdk/worker"

	"github.com/runnerflow/runnerflow/activities"
	"github.com/runnerflow/runnerflow/workflows"
)

// scaleSetWorkers serves runner scale sets: the Actions service's activities on the shared
// ScaleSetTaskQueue, and this worker's own listener queue, where the polls of the message
// sessions it opened go (a session lives in the worker that opened it). They are built from
// the worker's GitHub credential, and only by a worker that serves the default cluster: a
// scale set's runner Secret is written there.
func (a *App) scaleSetWorkers() ([]worker.Worker, error) {
	if a.deps.Kubernetes == nil {
		return nil, nil
	}
	cfg, err := scaleSetConfig(a.cfg)
	if err != nil {
		return nil, err
	}
	clients, err := activities.NewScaleSetClients(cfg)
	if err != nil {
		return nil, err
	}
	queue := workflows.ScaleSetListenerTaskQueue(a.listenerID())
	acts := &activities.ScaleSetActivities{
		Clients: clients, Kube: a.deps.Kubernetes, Sessions: activities.NewScaleSetSessions(), ListenerQueue: queue,
	}
	shared := worker.New(a.temporal, workflows.ScaleSetTaskQueue, worker.Options{
		Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DisableWorkflowWorker: true,
		DeploymentOptions: a.deploymentOptions(),
	})
	acts.Register(shared)
	own := worker.New(a.temporal, queue, worker.Options{
		Identity: a.cfg.Identity, WorkerStopTimeout: a.cfg.StopTimeout, DisableWorkflowWorker: true,
		DeploymentOptions: a.deploymentOptions(),
	})
	acts.RegisterListener(own)
	a.scaleSetSessions, a.listenerWorker = acts.Sessions, own
	// Last in the list, so stopped first (stopWorkers): the shared queue, then this worker's
	// own, so a listener whose session closes here opens its next one on a worker that stays.
	return []worker.Worker{own, shared}, nil
}

// leaveScaleSetSessions ends the sessions this worker holds as it stops (each closed as its
// listener learns it ended), and keeps the listener queue open until every listener has been
// told, within workflows.ScaleSetListenersToldBound.
func (a *App) leaveScaleSetSessions() {
	a.scaleSetSessions.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), workflows.ScaleSetListenersToldBound)
	defer cancel()
	if !a.scaleSetSessions.ListenersTold(ctx) {
		a.log.Warn("Scale-set listeners not all told their sessions ended before the listener queue closed; they open new ones after the poll's schedule-to-start timeout",
			"bound", workflows.ScaleSetListenersToldBound)
	}
}

// closeScaleSetSessions closes the sessions this worker still holds as it stops, within
// activities.ScaleSetSessionCloseTimeout.
func (a *App) closeScaleSetSessions() {
	if a.scaleSetSessions == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), activities.ScaleSetSessionCloseTimeout)
	defer cancel()
	if n := a.scaleSetSessions.CloseAll(ctx); n > 0 {
		a.log.Info("Scale-set sessions closed for the workers that stay", "sessions", n)
	}
}

// scaleSetConfig is the scale-set clients' configuration: the worker's GitHub credential.
func scaleSetConfig(cfg Config) (activities.ScaleSetConfig, error) {
	gh := cfg.GitHub
	key := gh.PrivateKeyPEM
	if len(key) == 0 && gh.PrivateKeyPath != "" {
		var err error
		if key, err = os.ReadFile(gh.PrivateKeyPath); err != nil {
			return activities.ScaleSetConfig{}, fmt.Errorf("scale sets: read the GitHub App's private key: %w", err)
		}
	}
	return activities.ScaleSetConfig{
		BaseURL: gh.BaseURL, Token: gh.Token, AppID: gh.AppID, InstallationID: gh.InstallationID,
		PrivateKeyPEM: key, Logger: cfg.Logger,
	}, nil
}

// listenerID names this worker's listener queue: unique per process, so a session's polls
// reach the one worker that holds it. A worker restarted under the same identity holds no
// session of its predecessor's, and says so (SessionLost): the listener opens a new one.
func (a *App) listenerID() string {
	if a.cfg.Identity != "" {
		return a.cfg.Identity
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s", os.Getpid(), host)
}
