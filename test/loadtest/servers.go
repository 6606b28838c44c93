package loadtest

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
)

// maxReviewBytes is the body cap cmd/webhook gives /authorize.
const maxReviewBytes = 1 << 20

// FloorResponse is the floor's answer to every review: no opinion.
const FloorResponse = `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1",` +
	`"metadata":{"creationTimestamp":null},"spec":{},"status":{"allowed":false,"reason":"floor"}}` + "\n"

// AdmissionFloorResponse is the /validate floor's answer to every review:
// allowed.
const AdmissionFloorResponse = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"floor","allowed":true}}` + "\n"

// Servers are nodeguard's /authorize and the floor, both on loopback
// behind one server.DynamicTLS.
type Servers struct {
	// AuthorizeURL is nodeguard's endpoint, with the ?timeout= the
	// apiserver appends.
	AuthorizeURL string
	// PoliciesURL, when Start was given policies, is the same authorizer
	// judged by them too, as cmd/webhook serves /authorize.
	PoliciesURL string
	// FloorURL answers any POST with FloorResponse.
	FloorURL string
	// RootCAs verifies both servers.
	RootCAs *x509.CertPool

	cancel context.CancelFunc
	done   chan error
}

// policiesPath serves the authorizer with policies, next to /authorize.
const policiesPath = "/authorize-with-policies"

// Start writes a throwaway self-signed certificate into certDir and serves
// a's decisions through pkg/server at /authorize, and with p at
// policiesPath when p is not nil, and the floor on a server of its own,
// until Close.
func Start(ctx context.Context, certDir string, a *authz.Authorizer, p *policy.AuthzPolicies) (*Servers, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		return nil, fmt.Errorf("generating serving certificate: %w", err)
	}
	files := server.TLSFiles{CertFile: filepath.Join(certDir, "tls.crt"), KeyFile: filepath.Join(certDir, "tls.key")}
	if err := os.WriteFile(files.CertFile, certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing serving certificate: %w", err)
	}
	if err := os.WriteFile(files.KeyFile, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing serving key: %w", err)
	}
	tlsConfig, err := server.NewDynamicTLS(files)
	if err != nil {
		return nil, fmt.Errorf("loading serving certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		return nil, errors.New("serving certificate does not parse as PEM")
	}

	var listeners []net.Listener
	closeAll := func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listening on loopback: %w", err)
		}
		listeners = append(listeners, l)
	}
	ours, err := server.New(server.Config{
		Listener:        listeners[0],
		TLS:             tlsConfig,
		Registry:        prometheus.NewRegistry(),
		ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("building nodeguard server: %w", err)
	}
	// Only errors are worth seeing from servers under load.
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.FromContext(ctx).V(100)))
	ours.HandleReview("/authorize", server.Authorize(a, nil, maxReviewBytes))
	if p != nil {
		ours.HandleReview(policiesPath, server.Authorize(a, p, maxReviewBytes))
	}
	floor := &http.Server{
		Handler:           FloorHandler(FloorResponse),
		TLSConfig:         tlsConfig.Config(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
	}

	s := &Servers{
		AuthorizeURL: "https://" + listeners[0].Addr().String() + "/authorize?timeout=30s",
		FloorURL:     "https://" + listeners[1].Addr().String() + "/authorize?timeout=30s",
		RootCAs:      roots,
		cancel:       cancel,
		done:         make(chan error, 2),
	}
	if p != nil {
		s.PoliciesURL = "https://" + listeners[0].Addr().String() + policiesPath + "?timeout=30s"
	}
	go func() { s.done <- ours.Run(ctx) }()
	go func() {
		err := floor.ServeTLS(listeners[1], "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = floor.Shutdown(shutdownCtx)
	}()
	return s, nil
}

// Close stops both servers and reports the first error either returned.
func (s *Servers) Close() error {
	s.cancel()
	var errs []error
	for range 2 {
		if err := <-s.done; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// FloorHandler reads the request body, as any review endpoint must for the
// connection to be reused, and answers response (FloorResponse for
// /authorize).
func FloorHandler(response string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, response)
	})
}
