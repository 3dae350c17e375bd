package demo

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runWorkerBinary builds the worker command and runs it as an operator would, against the
// system's Temporal, API server and GitHub: it becomes ready, serves the SDK's and its own
// series, and a SIGTERM stops it cleanly (exit status 0).
func runWorkerBinary(t *testing.T, sys *System) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin, "./worker")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the worker: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin,
		"--temporal-address="+sys.World.Temporal.Address, "--namespace="+sys.World.Temporal.Namespace,
		"--kubeconfig="+sys.World.Kube.KubeconfigPath, "--watch-namespace="+RunnerNamespace,
		"--github-url="+sys.World.GitHub.URL(), "--metrics-listen="+addr, "--stop-timeout=5s", "--log-level=warn")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+sys.World.GitHubToken)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	base := "http://" + addr
	waitFor(t, exited, &stderr, func() bool { return get(base+"/readyz") == http.StatusOK })
	if code := get(base + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d", code)
	}
	body := getBody(t, base+"/metrics")
	for _, want := range []string{"temporal_worker_start_total", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("worker after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("worker still running a minute after SIGTERM\n%s", stderr.String())
	}
}

// waitFor polls ready until it holds, failing if the process exits or a minute passes.
func waitFor(t *testing.T, exited <-chan struct{}, stderr *syncBuffer, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ready() {
		select {
		case <-exited:
			t.Fatalf("worker exited before it was ready\n%s", stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready after a minute\n%s", stderr.String())
		}
	}
}

func get(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer collects a process's output while the test may read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
