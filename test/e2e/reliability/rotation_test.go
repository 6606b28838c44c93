package reliability_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
	"github.com/nodeguard/nodeguard/test/e2e/reliability"
)

// rotationDeadline bounds how long a file replaced on disk may take to be
// in force: the watch reacts within milliseconds, so this only absorbs a
// busy machine.
const rotationDeadline = 30 * time.Second

// serialOf is the serial number of a PEM certificate.
func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("certificate does not parse as PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// servedSerial is the serial of the certificate a new handshake with host
// gets.
func servedSerial(host string, roots *x509.CertPool) (string, error) {
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// TestCertificateRotationUnderLoad serves a replica from files that the
// test replaces while reviews keep coming, both by rewriting them in place
// and by the atomic symlink swap of Secret volumes: a new serving
// certificate, then the client CA as a rotation goes (old and new CA, the
// clients move to the new one, the old CA goes), then a second serving
// certificate. Every new file must be in force within seconds (the serving
// certificate's serial seen in new handshakes, the client CAs by who is
// let in), and not one request may fail. Half the clients make a new
// connection, so a handshake, per request; the other half keep theirs.
func TestCertificateRotationUnderLoad(t *testing.T) {
	for _, tt := range []struct {
		name  string
		write func(dir string, files map[string][]byte) error
	}{
		{"secret volume symlink swap", reliability.WriteSecretVolume},
		{"rewritten in place", reliability.RewriteInPlace},
	} {
		t.Run(tt.name, func(t *testing.T) { testRotation(t, tt.write) })
	}
}

func testRotation(t *testing.T, write func(dir string, files map[string][]byte) error) {
	ctx := t.Context()
	// As in the shipped Deployment: the serving pair and the client CA
	// are two volumes.
	tlsDir, caDir := filepath.Join(t.TempDir(), "tls"), filepath.Join(t.TempDir(), "client-ca")
	for _, dir := range []string{tlsDir, caDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	read := func(flag string) []byte {
		data, err := os.ReadFile(env.WebhookArg(flag))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// It starts from the Env's files, which the readiness probe trusts.
	firstCert, firstKey, oldClientCA := read("--tls-cert-file"), read("--tls-private-key-file"), read("--client-ca-file")
	mustWrite := func(dir string, files map[string][]byte) {
		t.Helper()
		if err := write(dir, files); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(tlsDir, map[string][]byte{"tls.crt": firstCert, "tls.key": firstKey})
	mustWrite(caDir, map[string][]byte{"ca.crt": oldClientCA})
	r, err := env.StartReplica(ctx, "rotation-"+fmt.Sprint(time.Now().UnixNano()%1e6), replicaDrain,
		"--tls-cert-file="+filepath.Join(tlsDir, "tls.crt"), "--tls-private-key-file="+filepath.Join(tlsDir, "tls.key"),
		"--client-ca-file="+filepath.Join(caDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("replica log tail:\n%s", r.LogTail(40))
		}
	})
	host := mustHost(t, r.URL)

	servingCA, err := controlplane.NewCA("rotated-serving-ca")
	if err != nil {
		t.Fatal(err)
	}
	newClientCA, err := controlplane.NewCA("rotated-client-ca")
	if err != nil {
		t.Fatal(err)
	}
	// Clients trust the Env's serving CA and the new one, as a caBundle
	// does through a CA rotation.
	apiserverTLS := backendTLS(t)
	roots := apiserverTLS.RootCAs.Clone()
	roots.AppendCertsFromPEM(servingCA.CertPEM())
	oldClient := apiserverTLS.Certificates[0]
	newClientPEM, newClientKey, err := newClientCA.IssueClientCert("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	newClient, err := tls.X509KeyPair(newClientPEM, newClientKey)
	if err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[tls.Certificate]
	current.Store(&oldClient)
	clientTLS := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return current.Load(), nil }}

	kinds := map[string]request{}
	for _, handshakeEach := range []bool{true, false} {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS.Clone(), ForceAttemptHTTP2: true}}
		name := "reviews on kept connections"
		if handshakeEach {
			name = "reviews with a handshake each"
			c.Transport = certAtStart{base: clientTLS, current: &current}
		}
		send := webhookTraffic(t, r.URL, c)["direct: SubjectAccessReview"]
		kinds[name] = send
	}
	tr := startTraffic(kinds, 2)
	t.Cleanup(tr.stop)
	tr.waitMore(t, 20, "before the rotation")

	rotateServing := func(step string) {
		t.Helper()
		certPEM, keyPEM, err := servingCA.IssueServingCert("127.0.0.1", "localhost")
		if err != nil {
			t.Fatal(err)
		}
		want := serialOf(t, certPEM)
		written := time.Now()
		mustWrite(tlsDir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
		err = framework.Eventually(ctx, rotationDeadline, step+": the new serving certificate served", func(context.Context) (bool, string, error) {
			got, err := servedSerial(host, roots)
			return got == want, fmt.Sprintf("serial %s, want %s (%v)", got, want, err), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: new serving certificate served %v after the write", step, time.Since(written).Round(time.Millisecond))
		tr.waitMore(t, 20, "after "+step)
	}
	// lets reports whether a client with cert gets a review answered.
	lets := func(cert tls.Certificate) bool {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
			RootCAs: roots, MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		}}}
		resp, err := c.Post(r.URL+"/authorize", "application/json", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		// An empty body is a bad request: the client was let in.
		return resp.StatusCode != http.StatusUnauthorized
	}

	rotateServing("serving certificate 1")

	mustWrite(caDir, map[string][]byte{"ca.crt": append(append([]byte{}, oldClientCA...), newClientCA.CertPEM()...)})
	if err := framework.Eventually(ctx, rotationDeadline, "the new client CA trusted beside the old", func(context.Context) (bool, string, error) {
		return lets(newClient), "", nil
	}); err != nil {
		t.Fatal(err)
	}
	current.Store(&newClient)
	tr.waitMore(t, 20, "with both client CAs")
	mustWrite(caDir, map[string][]byte{"ca.crt": newClientCA.CertPEM()})
	if err := framework.Eventually(ctx, rotationDeadline, "the old client CA no longer trusted", func(context.Context) (bool, string, error) {
		return !lets(oldClient), "", nil
	}); err != nil {
		t.Fatal(err)
	}
	tr.waitMore(t, 20, "with the new client CA alone")

	rotateServing("serving certificate 2")
	if soak() {
		for i := range 30 {
			rotateServing(fmt.Sprintf("serving certificate %d", i+3))
		}
	}
	tr.stop()
	ok, failed := tr.totals()
	t.Logf("rotation under load:\n%s", tr.table())
	if failed != 0 {
		t.Fatalf("%d of %d requests failed during the rotation: %s", failed, ok+failed, tr.failureSummary())
	}
}

// certAtStart sends each request on a connection of its own, with the
// client certificate current when the request starts, as a client that
// switches certificates does for its new connections. Chosen inside the
// handshake instead, a handshake stalled across the webhook's CA reload and
// the client's switch would present the new certificate to a server that
// chose its CA pool before the reload: a refusal of the test's making
// (pkg/server's rotation test met it in CI).
type certAtStart struct {
	base    *tls.Config
	current *atomic.Pointer[tls.Certificate]
}

func (c certAtStart) RoundTrip(req *http.Request) (*http.Response, error) {
	cert := c.current.Load()
	config := c.base.Clone()
	config.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	transport := &http.Transport{TLSClientConfig: config, DisableKeepAlives: true, ForceAttemptHTTP2: true}
	return transport.RoundTrip(req)
}

func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
