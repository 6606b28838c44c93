package server

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"
)

// TLSFiles names the PEM files the server is configured with.
type TLSFiles struct {
	CertFile string
	KeyFile  string
	// ClientCAFile, when set, makes the review endpoints require a client
	// certificate that verifies against it (see RequireClientCert). A
	// certificate that does not verify fails the handshake on any path;
	// health and metrics endpoints may be reached without one, so that
	// kubelet probes and scrapers need no client certificate.
	ClientCAFile string
}

// secureCipherSuites are the TLS 1.2 suites with forward secrecy and AEAD;
// TLS 1.3 suites are not configurable and all are strong.
var secureCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// DynamicTLS serves certificates from files and follows their changes
// (including the symlink swap of Secret volumes) without a restart.
type DynamicTLS struct {
	serving    *dynamiccertificates.DynamicCertKeyPairContent
	clientCA   *dynamiccertificates.DynamicFileCAContent
	controller *dynamiccertificates.DynamicServingCertificateController
}

// NewDynamicTLS loads the files once, failing if they are unusable.
func NewDynamicTLS(files TLSFiles) (*DynamicTLS, error) {
	serving, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", files.CertFile, files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading serving certificate: %w", err)
	}
	d := &DynamicTLS{serving: serving}
	base := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: secureCipherSuites,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	var caProvider dynamiccertificates.CAContentProvider
	if files.ClientCAFile != "" {
		d.clientCA, err = dynamiccertificates.NewDynamicCAContentFromFile("client-ca", files.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("loading client CA: %w", err)
		}
		caProvider = d.clientCA
		base.ClientAuth = tls.VerifyClientCertIfGiven
	}
	d.controller = dynamiccertificates.NewDynamicServingCertificateController(base, caProvider, serving, nil, nil)
	serving.AddListener(d.controller)
	if d.clientCA != nil {
		d.clientCA.AddListener(d.controller)
	}
	if err := d.controller.RunOnce(); err != nil {
		return nil, fmt.Errorf("building TLS configuration: %w", err)
	}
	return d, nil
}

// RequiresClientCert reports whether review endpoints must see a verified
// client certificate.
func (d *DynamicTLS) RequiresClientCert() bool { return d.clientCA != nil }

// Run watches the files until ctx ends.
func (d *DynamicTLS) Run(ctx context.Context) {
	go d.serving.Run(ctx, 1)
	if d.clientCA != nil {
		go d.clientCA.Run(ctx, 1)
	}
	go d.controller.Run(1, ctx.Done())
}

// Config returns the tls.Config for a listener. Each handshake picks up the
// files' latest good content.
func (d *DynamicTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"h2", "http/1.1"},
		GetConfigForClient: d.controller.GetConfigForClient,
	}
}

// servingExpiryDesc describes the serving certificate's expiry, which
// alerts compare with time() (docs/install.md, runbook).
var servingExpiryDesc = prometheus.NewDesc("nodeguard_serving_certificate_expiration_timestamp_seconds",
	"When the serving certificate the webhook presents now expires (its notAfter, Unix seconds); follows the reloads of --tls-cert-file.",
	nil, nil)

// Describe and Collect make the serving certificate's expiry a metric, read
// at each scrape from the certificate in use: a renewal shows at once.
func (d *DynamicTLS) Describe(ch chan<- *prometheus.Desc) { ch <- servingExpiryDesc }

// Collect reports nothing while the certificate cannot be parsed (never
// the case for content the reloader accepted), rather than a made-up time.
func (d *DynamicTLS) Collect(ch chan<- prometheus.Metric) {
	certPEM, _ := d.serving.CurrentCertKeyContent()
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(servingExpiryDesc, prometheus.GaugeValue, float64(certs[0].NotAfter.Unix()))
}
