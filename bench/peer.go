package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// runPeer measures the peer (--peer arc) with the same bursts as runnerflow, in a fresh world
// of its own started once runnerflow's is gone, so the two never share the machine. Its
// warnings go to the same log file as runnerflow's.
func runPeer(ctx context.Context, opts Options, progress io.Writer, logPath string, res *Results) error {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		klog.Flush()
		_ = logFile.Close()
	}()
	quietKlog(logFile)
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn})).With("peer", opts.Peer)
	say := func(format string, args ...any) {
		fmt.Fprintf(progress, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	peer := &PeerResult{
		Name: "actions-runner-controller", Version: testworld.ARCVersion,
		SyncPeriodSeconds: opts.PeerSyncPeriod.Seconds(), BatchSeconds: arcBatchSeconds,
		ScaleDownDelaySeconds: benchScaleDownDelay.Seconds(),
	}
	res.Peer = peer
	w, err := startARCWorld(ctx, opts, log, say)
	if err != nil {
		res.Failures = append(res.Failures, "ARC world: "+err.Error())
		say("ARC world FAILED: %v", err)
		return ctx.Err()
	}
	defer w.stop()
	say("ARC world up (kube-apiserver with audit log, garbage collector, ARC %s controller manager and webhook server, GitHub double, simulator)", testworld.ARCVersion)
	for _, n := range opts.Jobs {
		b, err := w.burst(ctx, n)
		if err != nil {
			phase := fmt.Sprintf("ARC burst of %d jobs", n)
			res.Failures = append(res.Failures, phase+": "+err.Error())
			say("%s FAILED: %v", phase, err)
			log.Warn("ARC's logs at the failure\n" + w.arc.LogTails())
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		peer.Bursts = append(peer.Bursts, b)
	}
	return nil
}
