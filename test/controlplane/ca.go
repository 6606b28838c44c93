package controlplane

import (
	"crypto/ecdsa"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeguard/nodeguard/pkg/certs"
)

// certValidity is long enough that a `make run` session left open for days keeps working; these
// certificates live only as long as their work directory anyway.
const certValidity = 365 * 24 * time.Hour

// caValidity outlives every certificate a test CA issues.
const caValidity = 10 * certValidity

// CA is a throwaway certificate authority. It signs the client certificates that identify users
// and nodes to the apiserver, and serving certificates (the apiserver's own, a webhook's). It is
// pkg/certs' CA with the validity periods a test wants.
type CA struct{ ca *certs.CA }

// NewCA creates a self-signed CA with the given common name.
func NewCA(commonName string) (*CA, error) {
	ca, err := certs.NewCA(commonName, caValidity)
	if err != nil {
		return nil, err
	}
	return &CA{ca: ca}, nil
}

// CertPEM returns the CA certificate, PEM encoded: what a peer needs to trust certificates
// this CA issued.
func (ca *CA) CertPEM() []byte { return ca.ca.CertPEM() }

// CertPool returns a pool holding only this CA.
func (ca *CA) CertPool() *x509.CertPool { return ca.ca.CertPool() }

// IssueServingCert issues a TLS server certificate valid for the given hosts, each an IP
// address or a DNS name.
func (ca *CA) IssueServingCert(hosts ...string) (certPEM, keyPEM []byte, err error) {
	return ca.ca.IssueServingCert(certValidity, hosts...)
}

// IssueClientCert issues a TLS client certificate. The apiserver reads the common name as the
// user name and the organizations as its groups.
func (ca *CA) IssueClientCert(commonName string, organizations ...string) (certPEM, keyPEM []byte, err error) {
	return ca.ca.IssueClientCert(certValidity, commonName, organizations...)
}

// WriteCertPair writes certPEM and keyPEM to dir/name.crt and dir/name.key (the key readable
// only by its owner) and returns both paths, for the flags of programs that read files.
func WriteCertPair(dir, name string, certPEM, keyPEM []byte) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("writing certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("writing key: %w", err)
	}
	return certFile, keyFile, nil
}

// newKey makes a key for the control plane's own use (the service account signing key).
func newKey() (*ecdsa.PrivateKey, error) { return certs.NewKey() }
