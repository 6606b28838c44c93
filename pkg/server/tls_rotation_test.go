package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// testCA issues certificates with increasing serials, so that the served
// certificate can be told from the one before it.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key}
	ca.serial.Store(100)
	return ca
}

func (ca *testCA) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// issue returns a PEM certificate and key for 127.0.0.1 (serving) or for
// a client, and the certificate's serial.
func (ca *testCA) issue(t *testing.T, client bool) (certPEM, keyPEM []byte, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial = ca.serial.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("leaf-%d", serial)},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), serial
}

// fileWriter replaces the files a server reads, one way or another.
type fileWriter func(t *testing.T, dir string, files map[string][]byte)

// rewriteInPlace truncates and rewrites each file, as a careless operator
// would: readers can see a file empty, half written, or the cert new and
// the key old.
func rewriteInPlace(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// secretVolumeSwap writes the files as the kubelet updates a Secret
// volume: all of them into a new timestamped directory, then ..data (which
// the visible names link through) is swapped to it by renaming a new
// symlink over it, and the old directory is removed.
func secretVolumeSwap(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	generation := fmt.Sprintf("..2026_11_29_10_00_00.%d", time.Now().UnixNano())
	if err := os.Mkdir(filepath.Join(dir, generation), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, generation, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(generation, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// servedSerial is the serial of the certificate a new handshake gets.
func servedSerial(addr string, roots *x509.CertPool) (int64, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestCertificateRotationUnderLoad replaces the serving pair and the client
// CA while clients keep posting reviews, each request on a new connection
// so that every one is a handshake: no request may fail, and each new file
// must be in force soon after it lands.
func TestCertificateRotationUnderLoad(t *testing.T) {
	for _, tt := range []struct {
		name  string
		write fileWriter
	}{
		{"rewritten in place", rewriteInPlace},
		{"secret volume symlink swap", secretVolumeSwap},
	} {
		t.Run(tt.name, func(t *testing.T) { testRotationUnderLoad(t, tt.write) })
	}
}

func testRotationUnderLoad(t *testing.T, write fileWriter) {
	dir := t.TempDir()
	servingCA, oldClientCA, newClientCA := newTestCA(t, "serving"), newTestCA(t, "client-old"), newTestCA(t, "client-new")
	certPEM, keyPEM, firstSerial := servingCA.issue(t, false)
	write(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": oldClientCA.pem()})
	files := TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: filepath.Join(dir, "ca.crt")}
	addr, stop := startServer(t, files, func(*http.Request) error { return nil })
	defer stop()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(servingCA.pem())

	clientCert := func(ca *testCA) *tls.Certificate {
		c, k, _ := ca.issue(t, true)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &pair
	}
	oldClient, newClient := clientCert(oldClientCA), clientCert(newClientCA)
	var current atomic.Pointer[tls.Certificate]
	current.Store(oldClient)

	ctx, cancel := context.WithCancel(context.Background())
	var requests, failures atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				requests.Add(1)
				// The certificate is chosen as the request starts, as a
				// client that switches certificates does for new
				// connections. Chosen later, inside the handshake, a
				// handshake stalled (on a busy machine) across the server's
				// CA reload and the client's switch would present the new
				// certificate to a server that chose its CA pool before the
				// reload: a refusal of the test's making (seen in CI).
				code, err := postWith(addr, roots, current.Load())
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("status %d", code)
				}
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	load := func(n int64) {
		from := requests.Load()
		poll(t, fmt.Sprintf("%d more requests", n), func() (bool, string) { return requests.Load() >= from+n, "" })
	}
	load(50)

	// 1. A new serving pair from the same CA.
	certPEM, keyPEM, secondSerial := servingCA.issue(t, false)
	rotated := time.Now()
	write(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": oldClientCA.pem()})
	poll(t, "the new serving certificate", func() (bool, string) {
		s, err := servedSerial(addr, roots)
		return err == nil && s == secondSerial, fmt.Sprintf("serial %d (first %d) %v", s, firstSerial, err)
	})
	t.Logf("new serving certificate served %v after the write", time.Since(rotated).Round(time.Millisecond))
	load(50)

	// 2. The client CA as a rotation goes: both CAs, clients move to the
	// new one, then the old CA is dropped.
	write(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": append(oldClientCA.pem(), newClientCA.pem()...)})
	poll(t, "the new client CA trusted", func() (bool, string) {
		code, err := postWith(addr, roots, newClient)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v", code, err)
	})
	current.Store(newClient)
	load(50)
	write(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": newClientCA.pem()})
	poll(t, "the old client CA dropped", func() (bool, string) {
		code, err := postWith(addr, roots, oldClient)
		return err != nil || code == http.StatusUnauthorized, fmt.Sprintf("%d %v", code, err)
	})
	load(50)
	cancel()
	wg.Wait()
	t.Logf("%d requests, %d failed", requests.Load(), failures.Load())
	if failures.Load() != 0 {
		t.Fatalf("%d of %d requests failed during rotation; first: %v", failures.Load(), requests.Load(), firstFailure.Load())
	}
}

func postWith(addr string, roots *x509.CertPool, cert *tls.Certificate) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		RootCAs: roots, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil },
	}}}
	resp, err := c.Post("https://"+addr+"/echo", "application/json", strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// poll waits, up to a generous bound, for cond; detail says what was seen.
func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) {
			done, detail := cond()
			last = detail
			return done, nil
		})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}
