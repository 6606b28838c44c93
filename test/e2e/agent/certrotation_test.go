package agent_test

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// installCertificate issues a node client certificate valid for validity,
// writes it as the generation's file and moves kubelet-client-current.pem
// to it, as the kubelet's certificate manager does, and returns the
// certificate. The test plays that manager (it needs the CSR API's signer,
// which this control plane does not run), so the kubelet itself, started
// without rotateCertificates, would keep its old certificate on its open
// connections for up to five minutes, as client-go's reload does; the real
// manager closes them at once. A restart of the running kubelet plays that
// part.
func (n *node) installCertificate(generation string, validity time.Duration) *x509.Certificate {
	n.t.Helper()
	certPEM, keyPEM, err := env.CP.CA().IssueClientCertValidFor(validity, contract.NodeUserPrefix+n.Name, contract.NodesGroup)
	if err != nil {
		n.t.Fatal(err)
	}
	target := n.CertificatePath(generation)
	if err := os.WriteFile(target, append(certPEM, keyPEM...), 0o600); err != nil {
		n.t.Fatal(err)
	}
	link := filepath.Join(filepath.Dir(target), "kubelet-client-current.pem")
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		n.t.Fatal(err)
	}
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		n.t.Fatal(err)
	}
	if !n.IsStub() {
		if err := n.RestartKubeletAsAdmin(n.ctx); err != nil {
			n.t.Fatal(err)
		}
	}
	return certs[0]
}

// apiserverMetric returns the value of the apiserver's metric line that
// starts with series, 0 when there is none yet.
func apiserverMetric(t *testing.T, series string) float64 {
	t.Helper()
	data, err := env.Admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("apiserver metric %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// What the apiserver counts of the client certificates it sees: requests
// it could not authenticate (an expired certificate among the reasons),
// requests with an expired certificate, and requests with one that
// expires within 30 minutes (only the short-lived certificates of this
// test: every other one in the environment is valid for a year).
const (
	refusedRequests     = `authentication_attempts{result="error"}`
	expiredCertificate  = `apiserver_client_certificate_expiration_seconds_bucket{le="0"}`
	expiringCertificate = `apiserver_client_certificate_expiration_seconds_bucket{le="1800"}`
)

// TestBootstrapThenShortLivedCertificates: an agent started before the
// kubelet's TLS bootstrap waits without crashing and says why on /readyz;
// once the certificate exists it connects. Later the kubelet rotates to a
// certificate that is about to expire, and on to a fresh one before that
// expires; after the expiry the agent, never restarted, still reads its
// assignments and reports, and the apiserver never saw the expired
// certificate. The apiserver checks a client certificate's expiry on every
// request, and HTTP/2 keeps one connection open for hours: an agent that
// kept presenting a certificate on its open connection until client-go's
// five-minute check would have requests refused once it expired (the
// apiserver then sends GOAWAY and client-go reconnects with the new one).
// The agent moves its connections within ten seconds of a rotation.
// (With client-go's own reload this test fails: checked while writing it.)
func TestBootstrapThenShortLivedCertificates(t *testing.T) {
	n := newNode(t, nodeOptions{withoutCertificate: true})
	pid := n.AgentPID()
	a := n.configMap("kubelet-a", "maxPods: 42\n")

	// No certificate: alive, not ready, and /readyz says why.
	n.eventually("/readyz to say the agent waits for the certificate", func() (bool, string) {
		code, body, err := n.AgentGet("/readyz?verbose")
		return err == nil && code == http.StatusInternalServerError &&
			strings.Contains(body, "[-]apiserver-connection failed: waiting for the kubelet's credentials") &&
			strings.Contains(body, "kubelet-client-current.pem does not exist yet"), fmt.Sprint(code, " ", body, " ", err)
	})
	if code, body, err := n.AgentGet("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz while waiting for the certificate: %d %s %v", code, body, err)
	}
	n.noNodeYet()

	// The kubelet's bootstrap completes; it registers its Node.
	n.installCertificate("1", time.Hour)
	n.waitRegistered()
	// The kubelet's attempts without a certificate were refused before
	// any request was made; count from here.
	refusedBefore, expiredBefore := apiserverMetric(t, refusedRequests), apiserverMetric(t, expiredCertificate)
	n.assign("kubelet-a")
	n.passed(a)
	if code, body, err := n.AgentGet("/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz once connected: %d %s %v", code, body, err)
	}

	// The kubelet rotates to a certificate that expires soon; the agent's
	// connections move to it.
	expiringBefore := apiserverMetric(t, expiringCertificate)
	short := n.installCertificate("2", time.Minute)
	if err := os.Remove(n.CertificatePath("1")); err != nil {
		t.Fatal(err)
	}
	n.eventually("the agent to present the short-lived certificate", func() (bool, string) {
		return apiserverMetric(t, expiringCertificate) > expiringBefore, "no request with it yet"
	})
	// And on to a fresh one before it expires; the old file goes away.
	n.installCertificate("3", time.Hour)
	if err := os.Remove(n.CertificatePath("2")); err != nil {
		t.Fatal(err)
	}
	n.eventually("the short-lived certificate to expire", func() (bool, string) {
		return time.Now().After(short.NotAfter.Add(time.Second)), "valid until " + short.NotAfter.String()
	})

	// A new assignment after the expiry: a new named watch, status
	// patches and events.
	b := n.configMap("kubelet-b", "maxPods: 43\n")
	n.assign("kubelet-b")
	n.passed(b)
	if got := n.AgentPID(); got != pid {
		t.Fatalf("the agent was restarted (pid %d, then %d)", pid, got)
	}
	if got := apiserverMetric(t, expiredCertificate) - expiredBefore; got != 0 {
		t.Errorf("the agent presented an expired certificate in %v requests", got)
	}
	if got := apiserverMetric(t, refusedRequests) - refusedBefore; got != 0 {
		t.Errorf("the apiserver refused the credentials of %v requests", got)
	}
}
