package kubeclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
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

// New makes a Client from cfg. When cfg names client certificate files
// (the kubelet's kubelet-client-current.pem), it follows their rotation
// until ctx ends: it reads the files every CertificateCheckPeriod, and when
// they hold a new certificate, new connections use it and every open
// connection is closed, long-running watches included, so that requests
// and watches move to the new certificate before the old one expires.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Client, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" || len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
		return NewForConfig(cfg)
	}
	period := opts.CertificateCheckPeriod
	if period <= 0 {
		period = DefaultCertificateCheckPeriod
	}
	pair, err := readKeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	var inUse atomic.Pointer[tls.Certificate]
	inUse.Store(&pair.parsed)
	transportConfig, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("building the API transport: %w", err)
	}
	tlsConfig, err := transport.TLSConfigFor(transportConfig)
	if err != nil {
		return nil, fmt.Errorf("building the API client's TLS configuration: %w", err)
	}
	// client-go's own loader caches the files for a second: a connection
	// closed just after a rotation could reconnect with the old
	// certificate, and keep it. The certificate followRotation last read
	// is the one every handshake presents.
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return inUse.Load(), nil
	}
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	proxy := http.ProxyFromEnvironment
	if transportConfig.Proxy != nil {
		proxy = transportConfig.Proxy
	}
	// As client-go builds its own transport (transport/cache.go), with our
	// dialer, which can close every connection it made.
	base := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         dialer.DialContext,
		DisableCompression:  transportConfig.DisableCompression,
	})
	roundTripper, err := transport.HTTPWrappersForConfig(transportConfig, base)
	if err != nil {
		return nil, fmt.Errorf("building the API transport: %w", err)
	}
	client, err := newForConfigAndClient(cfg, &http.Client{Transport: roundTripper, Timeout: cfg.Timeout})
	if err != nil {
		return nil, err
	}
	go followRotation(ctx, cfg.CertFile, cfg.KeyFile, pair, period, func(next keyPair) {
		inUse.Store(&next.parsed)
		dialer.CloseAll()
	})
	return client, nil
}

// keyPair is the raw content of a certificate and its key, and the two
// parsed.
type keyPair struct {
	cert, key []byte
	parsed    tls.Certificate
}

func (p keyPair) equal(other keyPair) bool {
	return bytes.Equal(p.cert, other.cert) && bytes.Equal(p.key, other.key)
}

// readKeyPair reads a certificate and key that are usable together.
func readKeyPair(certFile, keyFile string) (keyPair, error) {
	var pair keyPair
	var err error
	if pair.cert, err = os.ReadFile(certFile); err != nil {
		return keyPair{}, fmt.Errorf("reading client certificate: %w", err)
	}
	if pair.key, err = os.ReadFile(keyFile); err != nil {
		return keyPair{}, fmt.Errorf("reading client key: %w", err)
	}
	if pair.parsed, err = tls.X509KeyPair(pair.cert, pair.key); err != nil {
		return keyPair{}, fmt.Errorf("client certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return pair, nil
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
		next, err := readKeyPair(certFile, keyFile)
		if err != nil {
			logger.V(2).Info("Client certificate not readable; keeping the connections", "err", err)
			continue
		}
		if next.equal(current) {
			continue
		}
		current = next
		logger.Info("Client certificate rotated; reconnecting with the new one", "certificate", certFile)
		rotated(next)
	}
}
