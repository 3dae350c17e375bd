//go:build upgradecheck

package upgrade

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one binary of either release, run against the world.
type process struct {
	u    *upgrade
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (u *upgrade) start(name, bin string, env []string, args ...string) *process {
	u.t.Helper()
	logPath := filepath.Join(u.dir, strings.ReplaceAll(name, " ", "-")+".log")
	f, err := os.Create(logPath)
	if err != nil {
		u.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		u.t.Fatalf("start %s: %v", name, err)
	}
	p := &process{u: u, name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	u.t.Cleanup(p.stop)
	return p
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop ends the process as a rolling deploy does (SIGTERM), then kills it if it lingers.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (u *upgrade) temporalFlags() []string {
	return []string{"--temporal-address", world.Temporal.Address, "--namespace", world.Temporal.Namespace}
}

func (u *upgrade) startWorker(bin, name string) *process {
	args := append(u.temporalFlags(), "--kubeconfig", world.Kube.KubeconfigPath, "--watch-namespace", u.ns,
		"--github-url", world.GitHub.URL(), "--metrics-listen", "127.0.0.1:0")
	p := u.start(name, bin, []string{"GITHUB_TOKEN=" + world.GitHubToken}, args...)
	u.logf("%s started (pid %d)", name, p.pid())
	return p
}

// startStarter starts a release's webhook intake on the address the double delivers to.
func (u *upgrade) startStarter(bin, name string) *process {
	args := append([]string{"serve", "--listen", u.addr, "--metrics-listen", ""}, u.temporalFlags()...)
	p := u.start(name, bin, []string{"GITHUB_WEBHOOK_SECRET=" + webhookSecret}, args...)
	u.logf("%s serving webhooks on %s (pid %d)", name, u.addr, p.pid())
	return p
}

// apply applies the two pools with the earlier release's `starter apply`.
func (u *upgrade) apply(starter string) {
	u.t.Helper()
	file := filepath.Join(u.dir, "pools.yaml")
	if err := os.WriteFile(file, []byte(u.poolsYAML()), 0o644); err != nil {
		u.t.Fatal(err)
	}
	out, err := exec.Command(starter, append([]string{"apply", "-f", file}, u.temporalFlags()...)...).CombinedOutput()
	if err != nil {
		u.t.Fatalf("starter apply: %v\n%s", err, out)
	}
	u.logf("pools applied by the earlier release's starter: %s", strings.TrimSpace(string(out)))
}

func (u *upgrade) poolsYAML() string {
	pool := func(name, label string, minR, maxR int, work string) string {
		return `---
name: ` + name + `
organization: ` + org + `
labels: [self-hosted, ` + label + `]
minReplicas: ` + itoa(minR) + `
maxReplicas: ` + itoa(maxR) + `
scaleDownDelay: 1s
namespace: ` + u.ns + `
template:
  metadata:
    annotations:
      sim.runnerflow.dev/work-duration: "` + work + `"
  spec:
    containers:
      - name: runner
        image: ghcr.io/actions/actions-runner:2.320.0
`
	}
	return pool(restPool, "rest", 1, 1, "1s") + pool(burst, "burst", 0, 6, "15s")
}

// build builds one of this tree's binaries once.
func (u *upgrade) build(name string) string {
	u.t.Helper()
	bin := filepath.Join(u.dir, "new-"+name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if out, err := exec.Command("go", "build", "-o", bin, "../../"+name).CombinedOutput(); err != nil {
		u.t.Fatalf("go build ./%s: %v\n%s", name, err, out)
	}
	return bin
}

// version is what a binary says with --version, or that it has none (releases before v5).
func (u *upgrade) version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || len(out) == 0 {
		return "(no --version before v5)"
	}
	return strings.TrimSpace(string(out))
}

func itoa(n int) string { return strconv.Itoa(n) }
