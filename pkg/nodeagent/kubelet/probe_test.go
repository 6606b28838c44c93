package kubelet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProber(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer healthy.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "[-]syncloop failed", http.StatusInternalServerError)
	}))
	defer failing.Close()
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hanging.Close()
	defer close(release)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	ctx := context.Background()
	if err := NewProber(healthy.URL+"/healthz", time.Second).Probe(ctx); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	if err := NewProber(failing.URL+"/healthz", time.Second).Probe(ctx); err == nil || !strings.Contains(err.Error(), "syncloop failed") {
		t.Fatalf("failing: %v", err)
	}
	if err := NewProber(hanging.URL+"/healthz", 100*time.Millisecond).Probe(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging: got %v, want a deadline error", err)
	}
	if err := NewProber(closedURL+"/healthz", time.Second).Probe(ctx); err == nil {
		t.Fatal("a closed port probed healthy")
	}
}
