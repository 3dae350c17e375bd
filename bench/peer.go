package main

import (
	"context"
	"fmt"
	"io"

	"github.com/runnerflow/runnerflow/localworld/testworld"
)

// ARC's two modes, as the comparison names them.
const (
	modeSummerwind = "summerwind"
	modeScaleSets  = "scale sets"
)

// runPeers measures each peer --peer names, in the order given, each in a world of its own.
func runPeers(ctx context.Context, opts Options, progress io.Writer, logPath string, res *Results) error {
	for _, p := range opts.peers() {
		var err error
		switch p {
		case peerARCScaleSet:
			err = runScaleSetPeer(ctx, opts, arcScaleSetDefaults, progress, logPath, res)
		case peerARCScaleSetTuned:
			err = runScaleSetPeer(ctx, opts, arcScaleSetTuned, progress, logPath, res)
		default:
			err = runPeer(ctx, opts, progress, logPath, res)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runPeer measures ARC's summerwind mode (--peer arc) with the same bursts as runnerflow, in a fresh world
// of its own started once runnerflow's is gone, so the two never share the machine. Its
// warnings go to the same log file as runnerflow's.
func runPeer(ctx context.Context, opts Options, progress io.Writer, logPath string, res *Results) error {
	log, say, closeLog, err := peerLog(progress, logPath, peerARC)
	if err != nil {
		return err
	}
	defer closeLog()
	peer := &PeerResult{
		Name: "actions-runner-controller", Mode: modeSummerwind, Version: testworld.ARCVersion,
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
