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
)

func TestServer(t *testing.T) {
	registry := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "x"})
	registry.MustRegister(counter)
	counter.Inc()
	var healthy, ready atomic.Bool
	healthy.Store(true)
	failWhen := func(ok *atomic.Bool, reason string) func(*http.Request) error {
		return func(*http.Request) error {
			if !ok.Load() {
				return errors.New(reason)
			}
			return nil
		}
	}
	srv, err := New("127.0.0.1:0", registry, Checks{
		Liveness:  []Check{NamedCheck("sync-loop", failWhen(&healthy, "stuck"))},
		Readiness: []Check{NamedCheck("credentials", failWhen(&ready, "no certificate yet"))},
	})
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
	tests := []struct {
		name           string
		healthy, ready bool
		path           string
		wantCode       int
		wantBody       string // exact when it does not start with "~", else a substring
	}{
		{"alive, not ready: /healthz", true, false, "/healthz", 200, "ok"},
		{"alive, not ready: /healthz?verbose", true, false, "/healthz?verbose", 200, "[+]ping ok\n[+]sync-loop ok\nhealthz check passed\n"},
		{"alive, not ready: /readyz says why", true, false, "/readyz", 500, "[+]ping ok\n[+]sync-loop ok\n[-]credentials failed: no certificate yet\nreadyz check failed\n"},
		{"alive, not ready: /readyz/credentials", true, false, "/readyz/credentials", 500, "~no certificate yet"},
		{"alive, not ready: /readyz/ping", true, false, "/readyz/ping", 200, "ok"},
		{"ready", true, true, "/readyz", 200, "ok"},
		{"stuck: /healthz", false, true, "/healthz", 500, "~[-]sync-loop failed: stuck\n"},
		{"stuck: /healthz/ping", false, true, "/healthz/ping", 200, "ok"},
		{"stuck: /healthz/sync-loop", false, true, "/healthz/sync-loop", 500, "~stuck"},
		{"stuck: /readyz", false, true, "/readyz", 500, "~[-]sync-loop failed: stuck\n"},
		{"unknown check", true, true, "/healthz/nope", 404, "~not found"},
	}
	for _, tc := range tests {
		healthy.Store(tc.healthy)
		ready.Store(tc.ready)
		code, body := get(tc.path)
		want, partial := strings.CutPrefix(tc.wantBody, "~")
		if code != tc.wantCode || (partial && !strings.Contains(body, want)) || (!partial && body != want) {
			t.Errorf("%s: GET %s = %d %q, want %d %q", tc.name, tc.path, code, body, tc.wantCode, tc.wantBody)
		}
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	if _, err := New(srv.Addr().String(), registry, Checks{}); err == nil {
		t.Fatal("a taken port was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestNewRefusesBadCheckNames: what would make http.ServeMux panic (two
// handlers for one path, a name it reads as a pattern) is an error from
// New, and no port is taken.
func TestNewRefusesBadCheckNames(t *testing.T) {
	ok := func(*http.Request) error { return nil }
	tests := []struct {
		name   string
		checks Checks
		want   string
	}{
		{"twice in liveness", Checks{Liveness: []Check{NamedCheck("a", ok), NamedCheck("a", ok)}}, `"a" used twice`},
		{"in liveness and readiness", Checks{Liveness: []Check{NamedCheck("a", ok)}, Readiness: []Check{NamedCheck("a", ok)}}, `"a" used twice`},
		{"twice in readiness", Checks{Readiness: []Check{NamedCheck("b", ok), NamedCheck("b", ok)}}, `"b" used twice`},
		{"the built-in ping", Checks{Readiness: []Check{NamedCheck("ping", ok)}}, `"ping" used twice`},
		{"empty", Checks{Liveness: []Check{NamedCheck("", ok)}}, `name ""`},
		{"a wildcard", Checks{Liveness: []Check{NamedCheck("{x}", ok)}}, `name "{x}"`},
		{"a slash", Checks{Readiness: []Check{NamedCheck("a/b", ok)}}, `name "a/b"`},
		{"a space", Checks{Readiness: []Check{NamedCheck("a b", ok)}}, `name "a b"`},
		{"a dot segment", Checks{Readiness: []Check{NamedCheck("..", ok)}}, `name ".."`},
		{"no function", Checks{Readiness: []Check{NamedCheck("c", nil)}}, `"c" has no function`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New("127.0.0.1:0", prometheus.NewRegistry(), tc.checks)
			if err == nil {
				_ = srv.listener.Close()
				t.Fatal("New accepted the checks")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error mentioning %s", err, tc.want)
			}
		})
	}
}
