package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/server/healthz"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// writeSelfSigned writes a self-signed serving cert for 127.0.0.1 and
// returns the paths and the certificate.
func writeSelfSigned(t *testing.T, dir, prefix string) (certFile, keyFile string, cert []byte) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(prefix, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, prefix+".crt"), filepath.Join(dir, prefix+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, certPEM
}

func startServer(t *testing.T, files TLSFiles, ready func(*http.Request) error) (addr string, stop func()) {
	t.Helper()
	dt, err := NewDynamicTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listener: ln, TLS: dt, Registry: prometheus.NewRegistry(),
		ReadyChecks: []healthz.HealthChecker{healthz.NamedCheck("test-ready", ready)}, ShutdownTimeout: 5 * time.Second,
		Degraded: []Degradable{&testDegraded}})
	if err != nil {
		t.Fatal(err)
	}
	srv.HandleReview("/echo", echoReview(1024))
	ctx, cancel := context.WithCancel(context.Background())
	dt.Run(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	return ln.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func clientFor(caPEM []byte, clientCert *tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if clientCert != nil {
		cfg.Certificates = []tls.Certificate{*clientCert}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHealthAndMetrics(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caPEM := writeSelfSigned(t, dir, "serving")
	var isReady atomic.Bool
	addr, stop := startServer(t, TLSFiles{CertFile: certFile, KeyFile: keyFile}, func(*http.Request) error {
		if !isReady.Load() {
			return io.EOF
		}
		return nil
	})
	defer stop()
	c := clientFor(caPEM, nil)
	base := "https://" + addr
	if code, _ := get(t, c, base+"/livez"); code != 200 {
		t.Fatalf("livez = %d", code)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, _ := get(t, c, base+path); code != 500 {
			t.Fatalf("%s before ready = %d, want 500", path, code)
		}
	}
	isReady.Store(true)
	if code, body := get(t, c, base+"/readyz?verbose"); code != 200 || !strings.Contains(body, "test-ready ok") || !strings.Contains(body, "shutdown ok") {
		t.Fatalf("readyz = %d %s", code, body)
	}
	testDegraded.detail.Store("reload failed: bad.yaml:3: boom")
	defer testDegraded.detail.Store("")
	if code, body := get(t, c, base+"/readyz?verbose"); code != 200 || !strings.Contains(body, "[!]fake degraded: reload failed: bad.yaml:3: boom\nreadyz check passed") {
		t.Fatalf("degraded readyz = %d %q", code, body)
	}
	if code, _ := get(t, c, base+"/readyz/test-ready"); code != 200 {
		t.Fatalf("single readyz check = %d", code)
	}
	resp, err := c.Post(base+"/echo", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /echo: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, body := get(t, c, base+"/metrics"); code != 200 || !strings.Contains(body, `nodeguard_http_requests_total{code="200",endpoint="/echo"} 1`) {
		t.Fatalf("metrics = %d, missing request counter:\n%s", code, body)
	}
}

func TestTLSVersionsAndReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, firstCA := writeSelfSigned(t, dir, "serving")
	addr, stop := startServer(t, TLSFiles{CertFile: certFile, KeyFile: keyFile}, func(*http.Request) error { return nil })
	defer stop()

	old := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11} //nolint:gosec // probing that old TLS is refused
	if conn, err := tls.Dial("tcp", addr, old); err == nil {
		conn.Close()
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	if code, _ := get(t, clientFor(firstCA, nil), "https://"+addr+"/livez"); code != 200 {
		t.Fatal("first cert not served")
	}

	// Replace the pair on disk; the new one must be served without restart.
	_, _, secondCA := writeSelfSigned(t, dir, "next")
	for _, f := range [][2]string{{"next.crt", "serving.crt"}, {"next.key", "serving.key"}} {
		if err := os.Rename(filepath.Join(dir, f[0]), filepath.Join(dir, f[1])); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := clientFor(secondCA, nil).Get("https://" + addr + "/livez")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new certificate not served after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestClientCARequired(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caPEM := writeSelfSigned(t, dir, "serving")
	clientCAFile, good := writeClientCA(t, dir, "client")
	_, other := writeClientCA(t, dir, "other")
	addr, stop := startServer(t, TLSFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCAFile},
		func(*http.Request) error { return nil })
	defer stop()

	post := func(c *http.Client) (int, error) {
		resp, err := c.Post("https://"+addr+"/echo", "application/json", strings.NewReader(`{}`))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(clientFor(caPEM, nil)); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("review without a client certificate: %d %v, want 401", code, err)
	}
	if code, _ := get(t, clientFor(caPEM, nil), "https://"+addr+"/livez"); code != 200 {
		t.Fatalf("probe without a client certificate got %d", code)
	}
	// Go's client withholds a certificate the server's CA list does not
	// name, so an untrusted one ends as "no certificate" or a failed
	// handshake, never as a served review.
	if code, err := post(clientFor(caPEM, &other)); err == nil && code != http.StatusUnauthorized {
		t.Fatalf("review with an untrusted client certificate: %d", code)
	}
	if code, err := post(clientFor(caPEM, &good)); err != nil || code != 200 {
		t.Fatalf("trusted client: %d %v", code, err)
	}
}

// writeClientCA writes a CA to dir and returns its path and a client
// certificate it signed.
func writeClientCA(t *testing.T, dir, name string) (string, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name + "-ca"}, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, name+"-ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

type fakeDegraded struct{ detail atomic.Value }

func (f *fakeDegraded) Name() string { return "fake" }
func (f *fakeDegraded) Degraded() string {
	s, _ := f.detail.Load().(string)
	return s
}

var testDegraded fakeDegraded
