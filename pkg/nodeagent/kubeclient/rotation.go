package kubeclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
)

// DefaultCertificateCheckPeriod is how often New looks at the client
// certificate files for a rotation, as often as the kubelet does for its own
// connections. client-go's own check runs every five minutes: a rotated
// certificate whose predecessor expires sooner than that (short-lived
// certificates, or a kubelet that renewed late) would leave the agent's
// requests refused (401) on connections still holding the expired one.
const DefaultCertificateCheckPeriod = 10 * time.Second

// Options tune New.
type Options struct {
	// CertificateCheckPeriod is how often the client certificate files are
	// compared with the ones in use; zero means
	// DefaultCertificateCheckPeriod.
	CertificateCheckPeriod time.Duration
}

// New makes a Client from creds, with scheme (from NewScheme) for its
// requests. When creds name client certificate files (the kubelet's
// kubelet-client-current.pem), it follows their rotation until ctx ends:
// starting from the key pair creds were loaded with, it reads the files
// every CertificateCheckPeriod, and when they hold a new certificate, new
// connections use it and every open connection is closed, long-running
// watches included, so that requests and watches move to the new
// certificate before the old one expires.
func New(ctx context.Context, creds Credentials, scheme *runtime.Scheme, opts Options) (*Client, error) {
	if creds.Config == nil {
		return nil, errors.New("building the API client: the credentials hold no REST config")
	}
	if creds.keyPair == nil && namesCertificateFiles(creds.Config) {
		return nil, fmt.Errorf("building the API client: the credentials name certificate files (%s) but hold no key pair: make them with Load or CredentialsFor", creds.Config.CertFile)
	}
	cfg, pair := creds.Config, creds.keyPair
	if pair == nil {
		return NewForConfig(cfg, scheme)
	}
	period := opts.CertificateCheckPeriod
	if period <= 0 {
		period = DefaultCertificateCheckPeriod
	}
	var inUse atomic.Pointer[tls.Certificate]
	inUse.Store(&pair.parsed)
	transportConfig, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("building the API transport: %w", err)
	}
	// client-go's transport as it builds it (CA file reloading, metrics,
	// wrappers), with two inputs of ours: every handshake presents the
	// certificate followRotation last read (client-go's loader caches the
	// files for a second, so a connection closed just after a rotation
	// could reconnect with the old certificate and keep it), and a dialer
	// that can close every connection it made.
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	transportConfig.TLS.CertFile, transportConfig.TLS.KeyFile, transportConfig.TLS.ReloadTLSFiles = "", "", false
	transportConfig.TLS.GetCertHolder = &transport.GetCertHolder{GetCert: func() (*tls.Certificate, error) { return inUse.Load(), nil }}
	transportConfig.DialHolder = &transport.DialHolder{Dial: dialer.DialContext}
	roundTripper, err := transport.New(transportConfig)
	if err != nil {
		return nil, fmt.Errorf("building the API transport: %w", err)
	}
	client, err := newForConfigAndClient(cfg, &http.Client{Transport: roundTripper, Timeout: cfg.Timeout}, scheme)
	if err != nil {
		return nil, err
	}
	go followRotation(ctx, cfg.CertFile, cfg.KeyFile, *pair, period, func(next keyPair) {
		inUse.Store(&next.parsed)
		dialer.CloseAll()
	})
	return client, nil
}

// keyPair is the raw content of a certificate and its key, the two parsed,
// and the certificate itself.
type keyPair struct {
	cert, key []byte
	parsed    tls.Certificate
	leaf      *x509.Certificate
}

// readKeyPair reads a certificate and key that are usable together.
func readKeyPair(certFile, keyFile string) (keyPair, error) {
	certPEM, keyPEM, err := readFiles(certFile, keyFile)
	if err != nil {
		return keyPair{}, err
	}
	return parseKeyPair(certFile, keyFile, certPEM, keyPEM)
}

func readFiles(certFile, keyFile string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(certFile); err != nil {
		return nil, nil, fmt.Errorf("reading client certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(keyFile); err != nil {
		return nil, nil, fmt.Errorf("reading client key: %w", err)
	}
	return certPEM, keyPEM, nil
}

func parseKeyPair(certFile, keyFile string, certPEM, keyPEM []byte) (keyPair, error) {
	parsed, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return keyPair{}, fmt.Errorf("client certificate %s and key %s: %w", certFile, keyFile, err)
	}
	leaf := parsed.Leaf
	if leaf == nil {
		// tls.X509KeyPair leaves Leaf out under GODEBUG=x509keypairleaf=0.
		if leaf, err = x509.ParseCertificate(parsed.Certificate[0]); err != nil {
			return keyPair{}, fmt.Errorf("parsing client certificate %s: %w", certFile, err)
		}
	}
	return keyPair{cert: certPEM, key: keyPEM, parsed: parsed, leaf: leaf}, nil
}

// followRotation calls rotated once the files hold another usable
// certificate. Files that are missing or do not match (a rotation in
// progress) are looked at again next time; the connections keep what they
// have meanwhile.
func followRotation(ctx context.Context, certFile, keyFile string, current keyPair, period time.Duration, rotated func(keyPair)) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		certPEM, keyPEM, err := readFiles(certFile, keyFile)
		if err != nil {
			logger.V(2).Info("Client certificate not readable; keeping the connections", "err", err)
			continue
		}
		// Parsed only when changed: most ticks find the same bytes.
		if bytes.Equal(certPEM, current.cert) && bytes.Equal(keyPEM, current.key) {
			continue
		}
		next, err := parseKeyPair(certFile, keyFile, certPEM, keyPEM)
		if err != nil {
			logger.V(2).Info("Client certificate and key do not match yet; keeping the connections", "err", err)
			continue
		}
		current = next
		logger.Info("Client certificate rotated; reconnecting with the new one", "certificate", certFile)
		rotated(next)
	}
}
