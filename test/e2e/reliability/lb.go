package reliability

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// ReadyPollInterval is how often the load balancer probes each backend's
// /readyz; a replica's drain must be longer, so that it is taken out of
// rotation before it stops serving.
const ReadyPollInterval = 50 * time.Millisecond

// maxFailuresKept bounds the failures a LoadBalancer remembers verbatim.
const maxFailuresKept = 20

// Backend is one replica behind a LoadBalancer.
type Backend struct {
	Name string
	URL  *url.URL
	// Served counts the requests routed to it.
	Served atomic.Int64
	ready  atomic.Bool
}

// Ready reports whether the last probe of /readyz passed.
func (b *Backend) Ready() bool { return b.ready.Load() }

// LoadBalancer is an HTTPS reverse proxy in front of webhook replicas. It
// routes round-robin among the backends whose /readyz passed at the last
// probe, and never retries: a request that fails to reach a backend, or
// that a backend answers with anything but 200, counts as failed and the
// client gets the failure.
type LoadBalancer struct {
	Backends []*Backend

	probe    *http.Client
	proxy    *httputil.ReverseProxy
	server   *http.Server
	listener net.Listener
	next     atomic.Uint64

	requests, failures atomic.Int64
	// abandoned counts requests their caller gave up on before their own
	// ?timeout= passed: a client's deadline on a loaded machine, not a
	// replica failing (the callers count their own failures).
	abandoned  atomic.Int64
	mu         sync.Mutex
	failureLog []string
}

// LoadBalancerConfig is what NewLoadBalancer needs.
type LoadBalancerConfig struct {
	// Listener accepts the clients' connections.
	Listener net.Listener
	// ServingCert is presented to clients.
	ServingCert tls.Certificate
	// BackendTLS verifies the backends and presents the client certificate
	// they require.
	BackendTLS *tls.Config
	// Backends are name -> base URL.
	Backends map[string]string
}

// NewLoadBalancer builds a load balancer; Run serves it.
func NewLoadBalancer(cfg LoadBalancerConfig) (*LoadBalancer, error) {
	if cfg.Listener == nil || cfg.BackendTLS == nil || len(cfg.Backends) == 0 {
		return nil, errors.New("load balancer: listener, backend TLS and backends are required")
	}
	lb := &LoadBalancer{listener: cfg.Listener}
	for name, raw := range cfg.Backends {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", name, err)
		}
		lb.Backends = append(lb.Backends, &Backend{Name: name, URL: u})
	}
	transport := &http.Transport{
		TLSClientConfig:     cfg.BackendTLS.Clone(),
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	lb.probe = &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: cfg.BackendTLS.Clone(), DisableKeepAlives: true}}
	lb.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			route := pr.In.Context().Value(routeKey{}).(route)
			pr.SetURL(route.backend.URL)
		},
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				lb.fail(fmt.Sprintf("%s %s: backend answered %s", resp.Request.Method, resp.Request.URL, resp.Status))
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil && time.Since(r.Context().Value(routeKey{}).(route).start) < reviewTimeout(r) {
				lb.abandoned.Add(1)
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			lb.fail(fmt.Sprintf("%s %s: %v", r.Method, r.URL, err))
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	lb.server = &http.Server{
		Handler:           http.HandlerFunc(lb.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cfg.ServingCert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	return lb, nil
}

// route is where serve sent a request, and when.
type route struct {
	backend *Backend
	start   time.Time
}

type routeKey struct{}

// reviewTimeout is the ?timeout= the apiserver gives a review; a request
// without one is never counted as abandoned.
func reviewTimeout(r *http.Request) time.Duration {
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil {
		return 0
	}
	return d
}

func (lb *LoadBalancer) serve(w http.ResponseWriter, r *http.Request) {
	lb.requests.Add(1)
	b := lb.pick()
	if b == nil {
		lb.fail(fmt.Sprintf("%s %s: no ready backend", r.Method, r.URL))
		http.Error(w, "no ready backend", http.StatusServiceUnavailable)
		return
	}
	b.Served.Add(1)
	lb.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, route{backend: b, start: time.Now()})))
}

// pick returns the next ready backend, round-robin, or nil.
func (lb *LoadBalancer) pick() *Backend {
	n := uint64(len(lb.Backends))
	start := lb.next.Add(1)
	for i := range n {
		if b := lb.Backends[(start+i)%n]; b.Ready() {
			return b
		}
	}
	return nil
}

func (lb *LoadBalancer) fail(what string) {
	lb.failures.Add(1)
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if len(lb.failureLog) < maxFailuresKept {
		lb.failureLog = append(lb.failureLog, what)
	}
}

// Run probes the backends and serves until ctx ends. It probes once before
// it accepts anything, so that the first requests find the ready backends.
func (lb *LoadBalancer) Run(ctx context.Context) error {
	lb.probeAll()
	go func() {
		ticker := time.NewTicker(ReadyPollInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				lb.probeAll()
			}
		}
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- lb.server.ServeTLS(lb.listener, "", "") }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("load balancer: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lb.server.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("load balancer shutdown: %w", err)
	}
	return nil
}

func (lb *LoadBalancer) probeAll() {
	var wg sync.WaitGroup
	for _, b := range lb.Backends {
		wg.Go(func() {
			resp, err := lb.probe.Get(b.URL.String() + "/readyz")
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			b.ready.Store(ok)
		})
	}
	wg.Wait()
}

// Counts returns the requests seen and the failures counted so far, and
// the first failures verbatim.
func (lb *LoadBalancer) Counts() (requests, failures int64, firstFailures []string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.requests.Load(), lb.failures.Load(), append([]string(nil), lb.failureLog...)
}

// Abandoned is how many requests their callers gave up on early.
func (lb *LoadBalancer) Abandoned() int64 { return lb.abandoned.Load() }
