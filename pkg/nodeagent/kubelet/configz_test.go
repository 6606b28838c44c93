package kubelet

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/certs"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/effective"
)

const runningConfigz = `{"kubeletconfig":{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":20}}`

// fakeKubelet is a TLS server that wants a client certificate, as a kubelet
// with x509 authentication, and answers as told; it records who asked.
type fakeKubelet struct {
	server  *httptest.Server
	caFile  string
	users   []string
	configz func(w http.ResponseWriter)
	flagz   string
}

func newFakeKubelet(t *testing.T) (*fakeKubelet, *rest.Config) {
	t.Helper()
	ca, err := certs.NewCA("test-ca", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{configz: func(w http.ResponseWriter) { fmt.Fprint(w, runningConfigz) }}
	mux := http.NewServeMux()
	mux.HandleFunc("/configz", func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			k.users = append(k.users, r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		k.configz(w)
	})
	mux.HandleFunc("/flagz", func(w http.ResponseWriter, r *http.Request) {
		if k.flagz == "" || r.Header.Get("Accept") != effective.FlagzAccept {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, k.flagz)
	})
	k.server = httptest.NewUnstartedServer(mux)
	servingCert, servingKey, err := ca.IssueServingCert(time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(servingCert, servingKey)
	if err != nil {
		t.Fatal(err)
	}
	k.server.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.CertPool()}
	k.server.StartTLS()
	t.Cleanup(k.server.Close)

	dir := t.TempDir()
	k.caFile = filepath.Join(dir, "kubelet-ca.crt")
	if err := os.WriteFile(k.caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := ca.IssueClientCert(time.Hour, "system:node:n1", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(dir, "kubelet-client-current.pem")
	if err := os.WriteFile(certFile, append(clientCert, clientKey...), 0o600); err != nil {
		t.Fatal(err)
	}
	// The kubeconfig's own server and CA are the apiserver's: the reader
	// must not use them for the kubelet.
	other, err := certs.NewCA("apiserver-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := &rest.Config{Host: "https://apiserver.invalid:6443", TLSClientConfig: rest.TLSClientConfig{CertFile: certFile, KeyFile: certFile, CAData: other.CertPEM()}}
	return k, creds
}

func newReader(k *fakeKubelet, creds *rest.Config, configFile string) *RunningReader {
	return &RunningReader{ServerURL: k.server.URL, CAFile: k.caFile, Credentials: func() (*rest.Config, error) { return creds, nil },
		Timeout: 5 * time.Second, Mode: ModeConfig, ConfigFile: configFile}
}

func TestRunningReaderReadsAsTheNode(t *testing.T) {
	k, creds := newFakeKubelet(t)
	dir := t.TempDir()
	own := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(own, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dropIns := filepath.Join(dir, "conf.d")
	for name, content := range map[string]string{"99-site.conf": "maxPods: 20", "10-a.conf": "x", "sub/50-b.conf": "y", "ignored.yaml": "z"} {
		path := filepath.Join(dropIns, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k.flagz = fmt.Sprintf(`{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","flags":{"config":%q,"config-dir":%q,"max-pods":"110"}}`, own, dropIns)
	r := newReader(k, creds, own)
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	obs, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(obs.Config), `"maxPods":20`) {
		t.Errorf("config = %s", obs.Config)
	}
	if obs.Flags["max-pods"] != "110" {
		t.Errorf("flags = %v", obs.Flags)
	}
	if len(k.users) != 1 || k.users[0] != "system:node:n1" {
		t.Errorf("the kubelet saw %v, want the node's certificate", k.users)
	}
	var files []string
	for _, f := range obs.Files {
		files = append(files, fmt.Sprintf("%s own=%v dropIn=%v", strings.TrimPrefix(f.Path, dir+"/"), f.Own, f.DropIn))
	}
	want := "config.yaml own=true dropIn=false|conf.d/10-a.conf own=false dropIn=true|conf.d/99-site.conf own=false dropIn=true|conf.d/sub/50-b.conf own=false dropIn=true"
	if got := strings.Join(files, "|"); got != want {
		t.Errorf("files =\n%s\nwant\n%s", got, want)
	}
}

func TestRunningReaderWithoutFlagz(t *testing.T) {
	k, creds := newFakeKubelet(t)
	dir := t.TempDir()
	own := filepath.Join(dir, "conf.d", "90-nodeguard.conf")
	if err := os.MkdirAll(filepath.Dir(own), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"90-nodeguard.conf", "99-site.conf"} {
		if err := os.WriteFile(filepath.Join(dir, "conf.d", name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := newReader(k, creds, own)
	r.Mode = ModeDropIn
	obs, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if obs.Flags != nil || len(obs.Files) != 2 || !obs.Files[0].Own || obs.Files[1].Own {
		t.Errorf("flags %v, files %+v: want the drop-ins of the agent's own directory", obs.Flags, obs.Files)
	}
}

func TestRunningReaderSeesAKubeletThatDoesNotReadTheAgentsFile(t *testing.T) {
	k, creds := newFakeKubelet(t)
	for _, tc := range []struct {
		mode  Mode
		flags string
		want  string
	}{
		{ModeConfig, `"config":"/tmp/other.yaml"`, "the kubelet runs --config=/tmp/other.yaml, not the agent's file /etc/kubelet.yaml"},
		{ModeConfig, `"max-pods":"110"`, "the kubelet runs without --config, so it never reads the agent's file /etc/kubelet.yaml"},
		{ModeDropIn, `"config":"/etc/kubelet.yaml"`, "the kubelet runs without --config-dir"},
		{ModeDropIn, `"config-dir":"/etc/other.d"`, "the kubelet's --config-dir is /etc/other.d"},
	} {
		k.flagz = `{"kind":"Flagz","flags":{` + tc.flags + `}}`
		r := newReader(k, creds, "/etc/kubelet.yaml")
		if tc.mode == ModeDropIn {
			r.ConfigFile = "/etc/kubelet.d/90-nodeguard.conf"
		}
		r.Mode = tc.mode
		obs, err := r.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(obs.NotReadingOwn, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.mode, tc.flags, obs.NotReadingOwn, tc.want)
		}
	}
}

func TestRunningReaderSaysWhy(t *testing.T) {
	k, creds := newFakeKubelet(t)
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusForbidden, "the kubelet's authorizer refused the node"},
		{http.StatusUnauthorized, "the kubelet refused the node's credentials"},
		{http.StatusNotFound, "does not serve"},
		{http.StatusInternalServerError, "500 Internal Server Error: boom"},
	} {
		k.configz = func(w http.ResponseWriter) { http.Error(w, "boom", tc.status) }
		_, err := newReader(k, creds, "/c").Read(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("status %d: %v, want %q", tc.status, err, tc.want)
		}
	}
	k.configz = func(w http.ResponseWriter) { fmt.Fprint(w, `{"other":{}}`) }
	if _, err := newReader(k, creds, "/c").Read(t.Context()); err == nil || !strings.Contains(err.Error(), `no "kubeletconfig"`) {
		t.Errorf("an answer without the configuration: %v", err)
	}
}

func TestRunningReaderVerifiesTheKubelet(t *testing.T) {
	k, creds := newFakeKubelet(t)
	r := newReader(k, creds, "/c")
	// Another CA: the kubelet's certificate does not verify.
	other, err := certs.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r.CAFile = filepath.Join(t.TempDir(), "other.crt")
	if err := os.WriteFile(r.CAFile, other.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(t.Context()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a kubelet whose certificate does not verify: %v", err)
	}
	// Without a CA the certificate is not checked, as the apiserver does
	// without --kubelet-certificate-authority.
	r.CAFile = ""
	if _, err := r.Read(t.Context()); err != nil {
		t.Errorf("without a CA file: %v", err)
	}
}

func TestRunningReaderNeedsCredentials(t *testing.T) {
	k, _ := newFakeKubelet(t)
	r := newReader(k, nil, "/c")
	r.Credentials = func() (*rest.Config, error) { return nil, fmt.Errorf("kubeconfig not there yet") }
	if _, err := r.Read(t.Context()); err == nil || !strings.Contains(err.Error(), "not there yet") {
		t.Errorf("no credentials: %v", err)
	}
	// A certificate the kubelet does not trust: the handshake fails.
	stranger, err := certs.NewCA("stranger", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := stranger.IssueClientCert(time.Hour, "system:node:n1", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	r.Credentials = func() (*rest.Config, error) {
		return &rest.Config{Host: "https://x", TLSClientConfig: rest.TLSClientConfig{CertData: cert, KeyData: key}}, nil
	}
	if _, err := r.Read(t.Context()); err == nil {
		t.Error("an untrusted client certificate was accepted")
	}
	if block, _ := pem.Decode(cert); block == nil {
		t.Fatal("no certificate")
	} else if c, err := x509.ParseCertificate(block.Bytes); err != nil || c.Subject.CommonName != "system:node:n1" {
		t.Fatalf("certificate: %v", err)
	}
}

func TestRunningReaderValidate(t *testing.T) {
	creds := func() (*rest.Config, error) { return nil, nil }
	for _, u := range []string{"", "127.0.0.1:10250", "ftp://x", "https://", "https://127.0.0.1:10250/configz"} {
		r := &RunningReader{ServerURL: u, Credentials: creds, Timeout: time.Second, ConfigFile: "/c"}
		if err := r.Validate(); err == nil {
			t.Errorf("URL %q: no error", u)
		}
	}
}

// The agent's drop-in counts where the kubelet will merge it, before it is
// written: what follows it can shadow it.
func TestRunningReaderPlacesTheAgentsDropInBeforeItExists(t *testing.T) {
	k, creds := newFakeKubelet(t)
	dir := filepath.Join(t.TempDir(), "conf.d")
	for _, name := range []string{"10-a.conf", "99-site.conf", "sub/50-b.conf"} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := newReader(k, creds, filepath.Join(dir, "90-nodeguard.conf"))
	r.Mode = ModeDropIn
	obs, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range obs.Files {
		got = append(got, fmt.Sprintf("%s own=%v data=%v", strings.TrimPrefix(f.Path, dir+"/"), f.Own, f.Data != nil))
	}
	want := "10-a.conf own=false data=true|90-nodeguard.conf own=true data=false|99-site.conf own=false data=true|sub/50-b.conf own=false data=true"
	if strings.Join(got, "|") != want {
		t.Errorf("files:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}
