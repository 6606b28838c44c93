package kubeclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// tlsServer answers every request with the CN of the client certificate.
func tlsServer(t *testing.T, ca *controlplane.CA) *httptest.Server {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.TLS.PeerCertificates[0].Subject.CommonName+"/"+r.TLS.PeerCertificates[0].Subject.Organization[0])
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.CertPool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writePEM writes a kubelet-style combined certificate and key file.
func writePEM(t *testing.T, ca *controlplane.CA, path, org string) {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueClientCert("system:node:node-1", org)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pointSymlink moves link to target atomically, as the kubelet does.
func pointSymlink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

func get(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestWaitsForBootstrapThenFollowsRotation(t *testing.T) {
	ca, err := controlplane.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsServer(t, ca)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	current := filepath.Join(dir, "pki", "kubelet-client-current.pem")

	// Nothing there yet: WaitForConfig waits.
	type result struct {
		creds Credentials
		err   error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fast := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 50 * time.Millisecond}
	go func() {
		creds, err := WaitForConfig(ctx, kubeconfig, fast, nil)
		done <- result{creds, err}
	}()
	if _, err := Load(kubeconfig); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Load without a kubeconfig: %v, want ErrNotReady", err)
	}
	if err := controlplane.WriteKubeconfig(kubeconfig, &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM(), CertFile: current, KeyFile: current}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(kubeconfig); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Load without the certificate: %v, want ErrNotReady", err)
	}
	select {
	case r := <-done:
		t.Fatalf("WaitForConfig returned before the certificate existed: %v", r.err)
	default:
	}
	// The kubelet finishes its bootstrap.
	if err := os.MkdirAll(filepath.Dir(current), 0o700); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "pki", "kubelet-client-2030-01-01.pem")
	writePEM(t, ca, first, "system:nodes")
	pointSymlink(t, first, current)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if user := r.creds.User(); user != "system:node:node-1" {
		t.Fatalf("User() = %q", user)
	}

	client, err := rest.HTTPClientFor(r.creds.Config)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := get(client, srv.URL); err != nil || got != "system:node:node-1/system:nodes" {
		t.Fatalf("first request: %q, %v", got, err)
	}

	// Rotation: a new file, the symlink moved. The organisation tells the
	// certificates apart.
	second := filepath.Join(dir, "pki", "kubelet-client-2030-06-01.pem")
	writePEM(t, ca, second, "rotated")
	pointSymlink(t, second, current)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Open connections keep the old certificate until client-go's
		// periodic check closes them; closing them here stands in for that.
		srv.CloseClientConnections()
		got, err := get(client, srv.URL)
		if err == nil && got == "system:node:node-1/rotated" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was never used; last answer %q, %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(garbage, []byte("{not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(garbage); err == nil || errors.Is(err, ErrNotReady) {
		t.Fatalf("a broken kubeconfig: %v, want a plain error", err)
	}
	// A broken kubeconfig ends the wait at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := WaitForConfig(ctx, garbage, DefaultBackoff, nil); err == nil || ctx.Err() != nil {
		t.Fatalf("WaitForConfig on a broken kubeconfig: %v (ctx %v)", err, ctx.Err())
	}
	// A cancelled wait says what it was waiting for.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := WaitForConfig(ctx, filepath.Join(dir, "missing"), DefaultBackoff, nil); err == nil {
		t.Fatal("a cancelled wait succeeded")
	}
}
