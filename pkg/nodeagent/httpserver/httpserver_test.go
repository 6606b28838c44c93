package httpserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/server/healthz"
)

func TestServer(t *testing.T) {
	registry := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "x"})
	registry.MustRegister(counter)
	counter.Inc()
	var healthy atomic.Bool
	healthy.Store(true)
	check := healthz.NamedCheck("sync-loop", func(*http.Request) error {
		if !healthy.Load() {
			return errors.New("stuck")
		}
		return nil
	})
	srv, err := New("127.0.0.1:0", registry, check)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	base := "http://" + srv.Addr().String()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	healthy.Store(false)
	if code, _ := get("/healthz"); code != http.StatusInternalServerError {
		t.Fatalf("/healthz with a failing check = %d", code)
	}
	if code, _ := get("/healthz/ping"); code != 200 {
		t.Fatalf("/healthz/ping = %d", code)
	}
	if _, err := New(srv.Addr().String(), registry); err == nil {
		t.Fatal("a taken port was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
