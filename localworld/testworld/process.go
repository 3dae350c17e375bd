package testworld

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is a server started for the test world, with its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // set before exited is closed
}

// startProcess runs bin in its own process group with stdout and stderr going to
// dir/<name>.log. It inherits the test process's environment.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	return startProcessWithEnv(dir, name, bin, nil, args...)
}

// startProcessWithEnv is startProcess with exactly the environment env (nil inherits the
// test process's): a peer that reads credentials from its environment gets only those it is
// meant to have.
func startProcessWithEnv(dir, name, bin string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so Stop also reaches any children it starts.
		Setpgid: true,
		// If the test binary dies without calling Stop (a go test timeout panics past
		// TestMain's cleanup), the kernel kills the server instead of leaving it running.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the process group and waits until the process is reaped. Test data
// is thrown away, so there is nothing a graceful shutdown would save.
func (p *process) kill() error {
	if p.hasExited() {
		return nil
	}
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

// terminate asks the process group to end (SIGTERM) and kills it if it has not within grace.
func (p *process) terminate(grace time.Duration) error {
	if p.hasExited() {
		return nil
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("terminate %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		return p.kill()
	}
}

// tail returns at most the last n bytes of the file at path.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return err.Error()
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
