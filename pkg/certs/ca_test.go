package certs

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
)

const year = 365 * 24 * time.Hour

func TestNewCA(t *testing.T) {
	ca, err := NewCA("test-ca", 2*year)
	if err != nil {
		t.Fatal(err)
	}
	c := parseOne(t, ca.CertPEM())
	if !c.IsCA || !c.MaxPathLenZero || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA certificate: IsCA %v, MaxPathLenZero %v, KeyUsage %v; want a CA that signs leaves only", c.IsCA, c.MaxPathLenZero, c.KeyUsage)
	}
	if got := c.NotAfter.Sub(c.NotBefore); got < 2*year || got > 2*year+ClockSkew+time.Minute {
		t.Errorf("CA validity %v, want about %v", got, 2*year+ClockSkew)
	}
	if len(c.SubjectKeyId) == 0 {
		t.Error("CA has no subject key ID")
	}
	for _, tt := range []struct {
		name     string
		cn       string
		validity time.Duration
	}{{"no name", "", year}, {"no validity", "ca", 0}, {"negative validity", "ca", -time.Hour}} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewCA(tt.cn, tt.validity); err == nil {
				t.Errorf("NewCA(%q, %v): want an error", tt.cn, tt.validity)
			}
		})
	}
}

func TestIssueServingCert(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueServingCert(year, "nodeguard-webhook.nodeguard.svc", "10.96.0.40")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	leaf := parseOne(t, certPEM)
	if !slices.Equal(leaf.AuthorityKeyId, ca.Certificate().SubjectKeyId) {
		t.Error("leaf's authority key ID is not its CA's subject key ID")
	}
	for _, tt := range []struct {
		host    string
		wantErr bool
	}{
		{host: "nodeguard-webhook.nodeguard.svc"},
		{host: "10.96.0.40"},
		{host: "nodeguard-webhook", wantErr: true},
		{host: "10.96.0.41", wantErr: true},
	} {
		t.Run(tt.host, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: tt.host, Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Errorf("Verify(%s) error = %v, want error %v", tt.host, err, tt.wantErr)
			}
		})
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a serving certificate verifies for client auth")
	}
	other := newTestCA(t)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.CertPool()}); err == nil {
		t.Error("a certificate verifies against a CA that did not sign it")
	}
}

func TestIssueClientCert(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueClientCert(year, "system:node:node-a", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	leaf := parseOne(t, certPEM)
	if leaf.Subject.CommonName != "system:node:node-a" || !slices.Equal(leaf.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v, want CN system:node:node-a O system:nodes", leaf.Subject)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify for client auth: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a server certificate")
	}
}

func TestIssueRefuses(t *testing.T) {
	ca, err := NewCA("short-lived", 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		issue   func() error
		wantErr string
	}{
		{"serving without hosts", func() error { _, _, err := ca.IssueServingCert(time.Hour); return err }, "at least one host"},
		{"client without a name", func() error { _, _, err := ca.IssueClientCert(time.Hour, ""); return err }, "common name"},
		{"zero validity", func() error { _, _, err := ca.IssueClientCert(0, "a"); return err }, "must be positive"},
		{"outliving the CA", func() error { _, _, err := ca.IssueServingCert(year, "a"); return err }, "after its CA"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.issue()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadCA(t *testing.T) {
	ca := newTestCA(t)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatalf("LoadCA of a CA's own files: %v", err)
	}
	certPEM, _, err := loaded.IssueServingCert(time.Hour, "a.example")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseOne(t, certPEM).Verify(x509.VerifyOptions{DNSName: "a.example", Roots: ca.CertPool()}); err != nil {
		t.Errorf("a certificate from the loaded CA does not verify against the original: %v", err)
	}

	other := newTestCA(t)
	otherKey, err := other.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	leafPEM, leafKey, err := ca.IssueClientCert(time.Hour, "leaf")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name             string
		certPEM, keyPEM  []byte
		wantErrSubstring string
	}{
		{"another CA's key", ca.CertPEM(), otherKey, "does not belong"},
		{"a leaf", leafPEM, leafKey, "not a CA"},
		{"no certificate", nil, keyPEM, "parsing CA certificate"},
		{"two certificates", append(ca.CertPEM(), other.CertPEM()...), keyPEM, "holds 2"},
		{"garbage key", ca.CertPEM(), []byte("not a key"), "parsing CA key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadCA(tt.certPEM, tt.keyPEM)
			if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstring) {
				t.Errorf("LoadCA: error %v, want one containing %q", err, tt.wantErrSubstring)
			}
		})
	}
}

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("test-ca", 10*year)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func parseOne(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 1 {
		t.Fatalf("got %d certificates, want 1", len(certs))
	}
	return certs[0]
}
