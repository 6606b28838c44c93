package framework

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// webhookPKI is the webhook's side of mutual TLS: a CA for its serving
// certificate, and a separate CA for the client certificate the apiserver
// presents to it.
type webhookPKI struct {
	servingCA         *controlplane.CA
	servingCertFile   string
	servingKeyFile    string
	clientCAFile      string
	apiserverCertFile string
	apiserverKeyFile  string
	apiserverCert     tls.Certificate
}

func newWebhookPKI(dir string) (*webhookPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("webhook PKI dir: %w", err)
	}
	p := &webhookPKI{}
	var err error
	if p.servingCA, err = controlplane.NewCA("nodeguard-webhook-ca"); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := p.servingCA.IssueServingCert("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if p.servingCertFile, p.servingKeyFile, err = controlplane.WriteCertPair(dir, "serving", certPEM, keyPEM); err != nil {
		return nil, err
	}
	clientCA, err := controlplane.NewCA("nodeguard-apiserver-client-ca")
	if err != nil {
		return nil, err
	}
	p.clientCAFile = filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(p.clientCAFile, clientCA.CertPEM(), 0o600); err != nil {
		return nil, fmt.Errorf("writing client CA: %w", err)
	}
	certPEM, keyPEM, err = clientCA.IssueClientCert("kube-apiserver")
	if err != nil {
		return nil, err
	}
	if p.apiserverCertFile, p.apiserverKeyFile, err = controlplane.WriteCertPair(dir, "apiserver-client", certPEM, keyPEM); err != nil {
		return nil, err
	}
	if p.apiserverCert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("loading apiserver client cert: %w", err)
	}
	return p, nil
}

// apiserverClient is an HTTPS client that trusts the webhook and presents
// the apiserver's client certificate.
func (p *webhookPKI) apiserverClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.servingCA.CertPEM())
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{p.apiserverCert}, MinVersion: tls.VersionTLS12,
		}},
	}
}

func caBundleString(pem []byte) string { return base64.StdEncoding.EncodeToString(pem) }
