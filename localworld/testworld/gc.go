package testworld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// GarbageCollectorUser is the identity the garbage collector acts as when the cluster was
// started with it among KubeOptions.Users (so its deletes can be told apart in the audit log);
// otherwise it acts as the admin.
const GarbageCollectorUser = "garbage-collector"

// gcSyncedLine is what kube-controller-manager logs once the garbage collector's monitors of
// every resource have synced: from then on an object whose owners are gone is deleted.
const gcSyncedLine = "all resource monitors have synced"

// StartGarbageCollector runs kube-controller-manager with its garbage collector only, as in a
// real cluster: an object whose owner references all point at deleted objects is deleted
// (background propagation), and a foreground deletion waits for its dependents. Nothing else
// of the controller-manager runs (no ReplicaSets, no namespace cleanup, no service-account
// tokens). It returns once the collector has synced; Stop ends it with the cluster.
//
// The collector discovers resource types at start and again every 30 seconds, so custom
// resources whose objects own others are best installed before it starts.
func (k *Kube) StartGarbageCollector(ctx context.Context) error {
	bin, err := ToolPath("kube-controller-manager")
	if err != nil {
		return err
	}
	kubeconfig, err := k.kubeconfigOf(GarbageCollectorUser)
	if err != nil {
		return err
	}
	p, err := startProcess(k.Dir, "kube-controller-manager", bin,
		"--kubeconfig="+kubeconfig,
		"--controllers=garbagecollector",
		"--leader-elect=false",
		// No serving port: nothing here scrapes or probes it.
		"--secure-port=0",
		"--v=1",
	)
	if err != nil {
		return err
	}
	k.addProcess(p)
	if err := waitForLogLine(ctx, p, gcSyncedLine); err != nil {
		return fmt.Errorf("garbage collector: %w\n%s", err, tail(p.logPath, 4096))
	}
	return nil
}

// waitForLogLine waits until a line of the process's log contains every one of parts, the
// process exits, or the start times out.
func waitForLogLine(ctx context.Context, p *process, parts ...string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(p.logPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if containsAll(line, parts) {
				return nil
			}
		}
		if p.hasExited() {
			return fmt.Errorf("%s exited during start: %v", p.name, p.waitErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (no line with %q in its log): %w", p.name, parts, ctx.Err())
		case <-tick.C:
		}
	}
}

func containsAll(line string, parts []string) bool {
	for _, part := range parts {
		if !strings.Contains(line, part) {
			return false
		}
	}
	return true
}
