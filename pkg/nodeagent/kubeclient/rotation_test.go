package kubeclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// nodeListServer answers every request with a NodeList holding one Node
// named after the client certificate's organization, over HTTP/2, so a
// test sees which certificate a request went out with. connections counts
// the TLS connections it accepted.
func nodeListServer(t *testing.T, ca *controlplane.CA) (srv *httptest.Server, connections func() int) {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 100)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list := corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: r.TLS.PeerCertificates[0].Subject.Organization[0]}}}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&list)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.CertPool()}
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			accepted <- struct{}{}
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, func() int { return len(accepted) }
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestNewUsesTheLoadedKeyPair: start-up reads the client certificate once,
// in Load; New starts from that key pair instead of reading the files
// again, so files gone in between change nothing until they come back.
func TestNewUsesTheLoadedKeyPair(t *testing.T) {
	ca, err := controlplane.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := nodeListServer(t, ca)
	dir := t.TempDir()
	current := filepath.Join(dir, "kubelet-client-current.pem")
	writePEM(t, ca, current, "loaded")
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	if err := controlplane.WriteKubeconfig(kubeconfig, &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM(), CertFile: current, KeyFile: current}}); err != nil {
		t.Fatal(err)
	}
	creds, err := Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	if user := creds.User(); user != "system:node:node-1" {
		t.Errorf("User() = %q after the files went, want the loaded certificate's", user)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := New(ctx, creds, newScheme(t), Options{})
	if err != nil {
		t.Fatalf("New read the certificate files again: %v", err)
	}
	list, err := client.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "loaded" {
		t.Fatalf("List = %+v, %v; want the loaded certificate presented", list, err)
	}
}

// TestNewFollowsRotation shows that a client from New moves to a rotated
// certificate by itself, with its connection open all along (HTTP/2 keeps
// one connection, and would keep the old certificate on it forever).
func TestNewFollowsRotation(t *testing.T) {
	ca, err := controlplane.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	srv, connections := nodeListServer(t, ca)
	dir := t.TempDir()
	current := filepath.Join(dir, "kubelet-client-current.pem")
	first := filepath.Join(dir, "kubelet-client-1.pem")
	writePEM(t, ca, first, "first")
	pointSymlink(t, first, current)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM(), CertFile: current, KeyFile: current}}
	creds, err := CredentialsFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := New(ctx, creds, newScheme(t), Options{CertificateCheckPeriod: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	who := func() string {
		t.Helper()
		list, err := client.Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items[0].Name
	}
	for range 3 {
		if got := who(); got != "first" {
			t.Fatalf("before the rotation the server saw %q", got)
		}
	}
	if n := connections(); n != 1 {
		t.Fatalf("%d connections before the rotation, want 1 kept open", n)
	}

	second := filepath.Join(dir, "kubelet-client-2.pem")
	writePEM(t, ca, second, "second")
	pointSymlink(t, second, current)
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	for got := who(); got != "second"; got = who() {
		if ctx.Err() != nil {
			t.Fatalf("the rotated certificate was never used; the server still sees %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := connections(); n != 2 {
		t.Errorf("%d connections after the rotation, want 2 (one closed, one opened)", n)
	}
}

// TestNewWithoutCertificateFiles falls back to client-go's transport.
func TestNewWithoutCertificateFiles(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: r.URL.Query().Get("fieldSelector")}}}})
	}))
	defer srv.Close()
	client, err := New(context.Background(), Credentials{Config: &rest.Config{Host: srv.URL}}, newScheme(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := client.Nodes().List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=node-1"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "metadata.name=node-1" {
		t.Fatalf("List = %+v, %v; want the field selector passed as a query parameter", list, err)
	}
}

// TestNewRefusesUnusableCertificate: files that exist but do not hold a
// matching certificate and key are an error, not a silent anonymous client.
func TestNewRefusesUnusableCertificate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CertFile: bad, KeyFile: bad}}
	if _, err := CredentialsFor(cfg); err == nil {
		t.Fatal("CredentialsFor accepted a certificate file that holds no certificate")
	}
	// Credentials made by hand, skipping the files, are refused too.
	if _, err := New(context.Background(), Credentials{Config: cfg}, newScheme(t), Options{}); err == nil || !strings.Contains(err.Error(), "CredentialsFor") {
		t.Fatalf("New with certificate files but no key pair: %v, want an error saying how to make credentials", err)
	}
	if _, err := New(context.Background(), Credentials{}, newScheme(t), Options{}); err == nil {
		t.Fatal("New accepted credentials without a REST config")
	}
}

func TestStatusNeverPassesOnItsOwn(t *testing.T) {
	var s Status
	for _, step := range []struct {
		do   func()
		want string
	}{
		{func() {}, "have not been read yet"},
		{func() { s.setWaiting(errors.New("no file")) }, "TLS bootstrap not finished?): no file"},
		{func() { s.setLoaded() }, "loaded; connecting"},
	} {
		step.do()
		if err := s.Check(nil); err == nil || !strings.Contains(err.Error(), step.want) {
			t.Fatalf("Check() = %v, want an error mentioning %q", err, step.want)
		}
	}
}
