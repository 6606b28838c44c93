package certs

import (
	"bytes"
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
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// ClockSkew backdates every certificate, so that one issued just now is not
// "not yet valid" to a peer whose clock is slightly behind.
const ClockSkew = time.Hour

// CA is a certificate authority whose key is in memory.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// NewCA creates a self-signed CA valid for validity from now. It signs leaf
// certificates only (path length zero).
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("a CA needs a common name")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("CA %q: validity %v must be positive", commonName, validity)
	}
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-ClockSkew).UTC(),
		NotAfter:              now.Add(validity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// crypto/x509 derives the subject key ID of a CA, and each leaf's
		// authority key ID from it.
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA %q: %w", commonName, err)
	}
	caCert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA %q: %w", commonName, err)
	}
	return newCA(caCert, key)
}

// LoadCA reads a CA from PEM, e.g. one written by an earlier WriteBundle,
// so that new leaf certificates chain to a CA the apiserver already trusts.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("CA certificate file holds %d certificates, want 1", len(certs))
	}
	caCert := certs[0]
	if !caCert.IsCA || caCert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certificate %q is not a CA", caCert.Subject.CommonName)
	}
	parsed, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing CA key: %w", err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key is a %T, which cannot sign", parsed)
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if pub, ok := key.Public().(equaler); !ok || !pub.Equal(caCert.PublicKey) {
		return nil, fmt.Errorf("CA key does not belong to certificate %q", caCert.Subject.CommonName)
	}
	return newCA(caCert, key)
}

func newCA(caCert *x509.Certificate, key crypto.Signer) (*CA, error) {
	certPEM, err := cert.EncodeCertificates(caCert)
	if err != nil {
		return nil, fmt.Errorf("encoding CA %q: %w", caCert.Subject.CommonName, err)
	}
	return &CA{cert: caCert, key: key, certPEM: certPEM}, nil
}

// CertPEM returns the CA certificate, PEM encoded: what a peer needs to trust
// the certificates this CA issued.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// KeyPEM returns the CA's private key, PEM encoded.
func (ca *CA) KeyPEM() ([]byte, error) {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encoding the key of CA %q: %w", ca.cert.Subject.CommonName, err)
	}
	return keyPEM, nil
}

// Certificate returns a copy of the CA certificate.
func (ca *CA) Certificate() *x509.Certificate {
	c := *ca.cert
	return &c
}

// CertPool returns a pool holding only this CA.
func (ca *CA) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// IssueServingCert issues a TLS server certificate valid for validity and
// for the given hosts, each an IP address or a DNS name; the first is also
// the common name.
func (ca *CA) IssueServingCert(validity time.Duration, hosts ...string) (certPEM, keyPEM []byte, err error) {
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
	return ca.issue(&tmpl, validity)
}

// IssueClientCert issues a TLS client certificate valid for validity.
// Kubernetes reads the common name as the user name and the organizations as
// its groups.
func (ca *CA) IssueClientCert(validity time.Duration, commonName string, organizations ...string) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("a client certificate needs a common name (the user name)")
	}
	tmpl := x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: organizations},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(&tmpl, validity)
}

func (ca *CA) issue(tmpl *x509.Certificate, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	name := tmpl.Subject.CommonName
	if validity <= 0 {
		return nil, nil, fmt.Errorf("certificate %q: validity %v must be positive", name, validity)
	}
	now := time.Now()
	tmpl.NotBefore = now.Add(-ClockSkew).UTC()
	tmpl.NotAfter = now.Add(validity).UTC()
	// A certificate that outlives its CA stops verifying when the CA
	// expires; say so now rather than on that day.
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		return nil, nil, fmt.Errorf("certificate %q would be valid until %s, after its CA %q expires (%s): issue a shorter one or make a new CA",
			name, tmpl.NotAfter.Format(time.RFC3339), ca.cert.Subject.CommonName, ca.cert.NotAfter.Format(time.RFC3339))
	}
	key, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, nil, err
	}
	// ECDSA keys only sign; they never encipher a key.
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing certificate %q: %w", name, err)
	}
	issued, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing certificate %q: %w", name, err)
	}
	if certPEM, err = cert.EncodeCertificates(issued); err != nil {
		return nil, nil, fmt.Errorf("encoding certificate %q: %w", name, err)
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key); err != nil {
		return nil, nil, fmt.Errorf("encoding the key of %q: %w", name, err)
	}
	return certPEM, keyPEM, nil
}

// NewKey makes an ECDSA P-256 key: quick to generate, and accepted
// everywhere Kubernetes takes a key.
func NewKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return key, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return serial, nil
}
