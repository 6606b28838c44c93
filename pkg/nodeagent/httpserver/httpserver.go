package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// shutdownTimeout bounds how long in-flight requests may take at exit.
const shutdownTimeout = 5 * time.Second

// Server serves /healthz, /readyz and /metrics.
type Server struct {
	listener net.Listener
	server   *http.Server
}

// Checks are the server's health checks. /healthz runs ping and Liveness;
// /readyz runs those and Readiness.
type Checks struct {
	Liveness  []Check
	Readiness []Check
}

// New listens on address right away, so that a taken port is an error at
// start-up rather than later. Check names must be unique across liveness
// and readiness (and not "ping"), and letters, digits, '-' and '_' only.
func New(address string, gatherer prometheus.Gatherer, checks Checks) (*Server, error) {
	live := append([]Check{pingCheck}, checks.Liveness...)
	ready := slices.Concat(live, checks.Readiness)
	if err := validateChecks(ready); err != nil {
		return nil, fmt.Errorf("health checks: %w", err)
	}
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", address, err)
	}
	mux := http.NewServeMux()
	installChecks(mux, "/healthz", live)
	installChecks(mux, "/readyz", ready)
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return &Server{
		listener: listener,
		server:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}, nil
}

// Addr is the address actually bound (useful with port 0).
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	errCh := make(chan error, 1)
	go func() { errCh <- s.server.Serve(s.listener) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("serving health and metrics: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.server.Shutdown(shutdownCtx); err != nil {
		klog.FromContext(ctx).Error(err, "Stopping the health and metrics server")
	}
	if err := <-errCh; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
