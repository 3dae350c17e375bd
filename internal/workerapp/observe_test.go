package workerapp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// Profiles are served only when PprofListen asks for them, on a listener of their own that
// serves nothing else.
func TestPprofServedOnlyWhenAskedFor(t *testing.T) {
	var off observability
	if err := off.listenPprof(Config{}); err != nil || off.pprof != nil || len(off.listeners()) != 0 {
		t.Fatalf("without PprofListen: listener %v, %v; want none", off.pprof, err)
	}

	var on observability
	if err := on.listenPprof(Config{PprofListen: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- on.pprof.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	base := "http://" + on.pprof.Addr()

	heap, status := get(t, base+"/debug/pprof/heap")
	if status != http.StatusOK || !bytes.HasPrefix(heap, []byte{0x1f, 0x8b}) {
		t.Errorf("heap profile: %d, %d bytes; want a gzipped profile", status, len(heap))
	}
	dump, status := get(t, base+"/debug/pprof/goroutine?debug=1")
	if status != http.StatusOK || !bytes.HasPrefix(dump, []byte("goroutine profile: total ")) {
		t.Errorf("goroutine dump: %d %.60q", status, dump)
	}
	if _, status := get(t, base+"/metrics"); status != http.StatusNotFound {
		t.Errorf("/metrics on the profile listener: %d, want 404", status)
	}
	if ls := on.listeners(); len(ls) != 1 || ls[0].name != "pprof" {
		t.Errorf("listeners %+v", on.listeners())
	}
}

func get(t *testing.T, url string) ([]byte, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body, resp.StatusCode
}
