package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
)

func TestRunRejectsUnknownCommands(t *testing.T) {
	for _, args := range [][]string{nil, {"launch"}, {"serve", "extra"}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

func TestServeRefusesWithoutSecret(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", "")
	err := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", ""}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "webhook secret") {
		t.Fatalf("serve without a secret: %v, want a refusal naming the secret", err)
	}
	empty := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"serve", "--webhook-secret-file", empty}, io.Discard); err == nil {
		t.Fatal("serve with an empty secret file started")
	}
	if err := run(context.Background(), []string{"serve", "--webhook-secret-file", empty + ".missing"}, io.Discard); err == nil {
		t.Fatal("serve with a missing secret file started")
	}
}

// TestServe runs `starter serve` with Temporal down: it starts anyway, is alive but not ready,
// answers a signed ping, serves its metrics, and stops cleanly.
func TestServe(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("file secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
			"--temporal-address", deadAddr, "--webhook-secret-file", secretFile}, pw)
		pw.Close()
	}()
	addrs := map[string]string{}
	sc := bufio.NewScanner(pr)
	for len(addrs) < 2 && sc.Scan() {
		name, addr, ok := strings.Cut(sc.Text(), " listening on ")
		if ok {
			addrs[name] = "http://" + addr
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if len(addrs) < 2 {
		cancel()
		t.Fatalf("serve did not report its listeners: %v (%v)", addrs, <-done)
	}

	expect(t, http.MethodGet, addrs["webhook"]+"/healthz", nil, http.StatusOK)
	expect(t, http.MethodGet, addrs["metrics"]+"/healthz", nil, http.StatusOK)
	expect(t, http.MethodGet, addrs["webhook"]+"/readyz", nil, http.StatusServiceUnavailable)
	expect(t, http.MethodGet, addrs["metrics"]+"/readyz", nil, http.StatusServiceUnavailable)
	body := `{"zen":"Design for failure.","hook_id":1}`
	ping := map[string]string{"X-GitHub-Event": "ping", "Content-Type": "application/json",
		"X-Hub-Signature-256": githubdouble.Sign("file secret", []byte(body))}
	expect(t, http.MethodPost, addrs["webhook"]+"/webhook", ping, http.StatusOK, body)
	ping["X-Hub-Signature-256"] = "sha256=00"
	expect(t, http.MethodPost, addrs["webhook"]+"/webhook", ping, http.StatusUnauthorized, body)
	metrics := expect(t, http.MethodGet, addrs["metrics"]+"/metrics", nil, http.StatusOK)
	if !strings.Contains(metrics, `runnerflow_webhook_events_total{event="ping",outcome="pong"} 1`) {
		t.Errorf("metrics do not count the ping:\n%s", metrics)
	}
	if resp, err := http.Get(addrs["webhook"] + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("metrics are served on the public webhook listener")
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
}

func expect(t *testing.T, method, url string, headers map[string]string, want int, body ...string) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(strings.Join(body, "")))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Errorf("%s %s: %d %s, want %d", method, url, resp.StatusCode, b, want)
	}
	return string(b)
}
