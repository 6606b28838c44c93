package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"

	"k8s.io/client-go/util/cert"
)

func TestIssueServingCert(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServingCert("127.0.0.1", "localhost", "nodeguard-webhook.nodeguard.svc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	leaf := parseOne(t, certPEM)

	tests := []struct {
		host    string
		wantErr bool
	}{
		{host: "127.0.0.1"},
		{host: "localhost"},
		{host: "nodeguard-webhook.nodeguard.svc"},
		{host: "127.0.0.2", wantErr: true},
		{host: "example.com", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{
				DNSName:   tt.host,
				Roots:     ca.CertPool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Errorf("Verify(%s) error = %v, want error %v", tt.host, err, tt.wantErr)
			}
		})
	}

	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: other.CertPool()}); err == nil {
		t.Error("a certificate verified against a CA that did not sign it")
	}
}

func TestIssueClientCert(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cn   string
		orgs []string
	}{
		{name: "node", cn: "system:node:node-a", orgs: []string{"system:nodes"}},
		{name: "admin", cn: "admin", orgs: []string{"system:masters"}},
		{name: "no groups", cn: "alice"},
		{name: "several groups", cn: "bob", orgs: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.IssueClientCert(tt.cn, tt.orgs...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("certificate and key do not match: %v", err)
			}
			leaf := parseOne(t, certPEM)
			if leaf.Subject.CommonName != tt.cn || !slices.Equal(leaf.Subject.Organization, tt.orgs) {
				t.Errorf("subject = CN %q O %q, want CN %q O %q", leaf.Subject.CommonName, leaf.Subject.Organization, tt.cn, tt.orgs)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("client certificate does not verify for client auth: %v", err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
				t.Error("client certificate also verifies as a server certificate")
			}
		})
	}
}

func TestIssueRejectsMissingNames(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.IssueServingCert(); err == nil {
		t.Error("IssueServingCert() with no host: want an error")
	}
	if _, _, err := ca.IssueClientCert(""); err == nil {
		t.Error(`IssueClientCert("") : want an error`)
	}
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
