package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is long enough that a `make run` session left open for days keeps working; these
// certificates live only as long as their work directory anyway.
const certValidity = 365 * 24 * time.Hour

// clockSkew backdates certificates so a freshly issued one is not "not yet valid" to a peer
// whose clock is slightly behind.
const clockSkew = time.Hour

// CA is a throwaway certificate authority. It signs the client certificates that identify users
// and nodes to the apiserver, and serving certificates (the apiserver's own, a webhook's).
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// NewCA creates a self-signed CA with the given common name.
func NewCA(commonName string) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	caCert, err := cert.NewSelfSignedCACert(cert.Config{CommonName: commonName, NotBefore: time.Now().Add(-clockSkew)}, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA %q: %w", commonName, err)
	}
	certPEM, err := cert.EncodeCertificates(caCert)
	if err != nil {
		return nil, fmt.Errorf("encoding CA %q: %w", commonName, err)
	}
	return &CA{cert: caCert, key: key, certPEM: certPEM}, nil
}

// CertPEM returns the CA certificate, PEM encoded: what a peer needs to trust certificates
// this CA issued.
func (ca *CA) CertPEM() []byte {
	return append([]byte(nil), ca.certPEM...)
}

// CertPool returns a pool holding only this CA.
func (ca *CA) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// IssueServingCert issues a TLS server certificate valid for the given hosts, each an IP
// address or a DNS name.
func (ca *CA) IssueServingCert(hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("a serving certificate needs at least one host")
	}
	tmpl := x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, host := range hosts {
		if ip := net.ParseIP(host); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, host)
		}
	}
	return ca.issue(&tmpl)
}

// IssueClientCert issues a TLS client certificate. The apiserver reads the common name as the
// user name and the organizations as its groups.
func (ca *CA) IssueClientCert(commonName string, organizations ...string) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("a client certificate needs a common name (the user name)")
	}
	tmpl := x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: organizations},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(&tmpl)
}

func (ca *CA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generating a serial number: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = now.Add(certValidity)
	// ECDSA keys only sign; they never encipher a key.
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	issued, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing certificate issued for %q: %w", tmpl.Subject.CommonName, err)
	}
	if certPEM, err = cert.EncodeCertificates(issued); err != nil {
		return nil, nil, fmt.Errorf("encoding certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key); err != nil {
		return nil, nil, fmt.Errorf("encoding key for %q: %w", tmpl.Subject.CommonName, err)
	}
	return certPEM, keyPEM, nil
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

// newKey makes an ECDSA P-256 key: far quicker to generate than RSA, which matters when every
// test run makes a dozen of them, and accepted everywhere Kubernetes takes a key.
func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return key, nil
}
