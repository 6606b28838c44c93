package controlplane

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestIssueClientCertValidFor(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	certPEM, _, err := ca.IssueClientCertValidFor(30*time.Second, "system:node:n1", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseOne(t, certPEM)
	// Certificates carry whole seconds.
	if leaf.NotAfter.Before(before.Add(29*time.Second)) || leaf.NotAfter.After(time.Now().Add(31*time.Second)) {
		t.Errorf("NotAfter %v, want about 30s after %v", leaf.NotAfter, before)
	}
	verify := func(at time.Time) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(time.Now()); err != nil {
		t.Errorf("not valid now: %v", err)
	}
	if err := verify(leaf.NotAfter.Add(time.Second)); err == nil {
		t.Error("still valid after NotAfter")
	}
	if _, _, err := ca.IssueClientCertValidFor(0, "system:node:n1"); err == nil {
		t.Error("a zero validity was accepted")
	}
}
