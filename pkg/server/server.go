package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// Config is what a Server needs. Every field is required unless noted.
type Config struct {
	// Listener accepts connections; the server wraps it in TLS.
	Listener net.Listener
	TLS      *DynamicTLS
	// Registry receives the HTTP metrics and is served on /metrics.
	Registry *prometheus.Registry
	// ReadyChecks must pass for /readyz and /healthz.
	ReadyChecks []healthz.HealthChecker
	// Degraded reporters show in the verbose output of /readyz and
	// /healthz without failing them.
	Degraded []Degradable
	// QuiesceDuration is how long the server keeps serving, unready, after
	// it is told to stop, so that load balancers move traffic away first.
	QuiesceDuration time.Duration
	// ShutdownTimeout bounds waiting for in-flight requests after that.
	ShutdownTimeout time.Duration
}

// Server is the webhook's HTTPS server.
type Server struct {
	cfg      Config
	router   chi.Router
	metrics  *httpMetrics
	stopping atomic.Bool
}

// New builds a Server with health and metrics endpoints installed. Mount
// review endpoints with Handle before Run.
func New(cfg Config) (*Server, error) {
	if cfg.Listener == nil || cfg.TLS == nil || cfg.Registry == nil {
		return nil, errors.New("server: listener, TLS and registry are required")
	}
	m, err := newHTTPMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	if err := cfg.Registry.Register(cfg.TLS); err != nil {
		return nil, fmt.Errorf("registering the serving certificate's metric: %w", err)
	}
	s := &Server{cfg: cfg, router: chi.NewRouter(), metrics: m}
	// Last-resort recovery: endpoints recover their own panics into
	// well-formed reviews; this only catches what escapes them.
	s.router.Use(middleware.Recoverer)

	live := []healthz.HealthChecker{healthz.PingHealthz}
	ready := append([]healthz.HealthChecker{healthz.PingHealthz}, cfg.ReadyChecks...)
	// The health handlers live on their own mux so that the verbose
	// /healthz and /readyz can carry degraded detail.
	health := http.NewServeMux()
	healthz.InstallHandler(health, ready...)
	healthz.InstallLivezHandler(health, live...)
	healthz.InstallReadyzHandler(health, append(ready, healthz.NamedCheck("shutdown", s.checkNotStopping))...)
	for _, path := range []string{"/healthz", "/readyz"} {
		s.router.Handle(path, withDegradedDetail(health, cfg.Degraded))
		s.router.Handle(path+"/*", health)
	}
	s.router.Handle("/livez", health)
	s.router.Handle("/livez/*", health)
	s.router.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	return s, nil
}

// Handle mounts an endpoint, instrumented under its path.
func (s *Server) Handle(path string, h http.Handler) {
	s.router.Handle(path, s.metrics.instrument(path, h))
}

// HandleReview mounts a review endpoint: like Handle, but when a client CA
// is configured the caller must have presented a certificate it verified.
func (s *Server) HandleReview(path string, h http.Handler) {
	if s.cfg.TLS.RequiresClientCert() {
		h = requireVerifiedClient(h)
	}
	s.Handle(path, h)
}

func requireVerifiedClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			httpError(w, http.StatusUnauthorized, "%s requires a client certificate signed by the configured client CA", r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) checkNotStopping(*http.Request) error {
	if s.stopping.Load() {
		return errors.New("shutting down")
	}
	return nil
}

// Run serves until ctx ends, then quiesces (serves, unready) and shuts
// down gracefully.
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	srv := &http.Server{
		Handler:           s.router,
		TLSConfig:         s.cfg.TLS.Config(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          klog.NewStandardLogger("INFO"),
		BaseContext:       func(net.Listener) context.Context { return klog.NewContext(context.Background(), logger) },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(s.cfg.Listener, "", "") }()
	logger.Info("Serving", "address", s.cfg.Listener.Addr().String())

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	logger.Info("Quiescing: readiness now fails, requests are still served", "duration", s.cfg.QuiesceDuration)
	time.Sleep(s.cfg.QuiesceDuration)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	logger.Info("Stopped")
	return nil
}
