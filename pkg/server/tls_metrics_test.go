package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"
)

// selfSignedUntil returns a PEM certificate and key valid until notAfter.
func selfSignedUntil(t *testing.T, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(notAfter.Unix()), Subject: pkix.Name{CommonName: "nodeguard-webhook.nodeguard.svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"nodeguard-webhook.nodeguard.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestServingCertificateExpiryMetric: the metric is the notAfter of the
// certificate in use, and follows a renewal written as the kubelet updates
// a Secret volume.
func TestServingCertificateExpiryMetric(t *testing.T) {
	dir := t.TempDir()
	first := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second)
	certPEM, keyPEM := selfSignedUntil(t, first)
	secretVolumeSwap(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	d, err := NewDynamicTLS(TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(d); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(d); got != float64(first.Unix()) {
		t.Fatalf("nodeguard_serving_certificate_expiration_timestamp_seconds = %v, want %d", got, first.Unix())
	}
	if n, err := testutil.GatherAndCount(reg, "nodeguard_serving_certificate_expiration_timestamp_seconds"); err != nil || n != 1 {
		t.Fatalf("gathered %d series (%v), want 1", n, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.Run(ctx)
	renewed := first.Add(30 * 24 * time.Hour)
	certPEM, keyPEM = selfSignedUntil(t, renewed)
	secretVolumeSwap(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return testutil.ToFloat64(d) == float64(renewed.Unix()), nil
	})
	if err != nil {
		t.Fatalf("after the renewal the metric is %v, want %d: %v", testutil.ToFloat64(d), renewed.Unix(), err)
	}
}
