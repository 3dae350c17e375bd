package testworld

import (
	"errors"
	"fmt"
	"syscall"
)

// PauseAPIServer stops kube-apiserver where it stands (SIGSTOP to its process group), as an API
// server that hangs does: connections stay open and requests get no answer, so every client
// (the worker's activities and pod watcher, the garbage collector, the simulator's kubelet)
// meets its own timeouts rather than a refused connection. etcd keeps running, so nothing is
// lost; ResumeAPIServer (SIGCONT) lets the same process carry on with the same state, watches
// and ports. Pausing is the outage issue 17 describes (an API server paused 30 and 90 s); a
// restart would test a crash instead, which refuses connections at once.
func (k *Kube) PauseAPIServer() error { return k.signalAPIServer(syscall.SIGSTOP) }

// ResumeAPIServer continues an API server PauseAPIServer stopped.
func (k *Kube) ResumeAPIServer() error { return k.signalAPIServer(syscall.SIGCONT) }

func (k *Kube) signalAPIServer(sig syscall.Signal) error {
	for _, p := range k.processes() {
		if p.name != "kube-apiserver" {
			continue
		}
		if p.hasExited() {
			return fmt.Errorf("kube-apiserver has exited: %v", p.waitErr)
		}
		if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal kube-apiserver: %w", err)
		}
		return nil
	}
	return errors.New("no kube-apiserver in this world")
}
