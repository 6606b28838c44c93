package certs

import (
	"bytes"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func testBundle(dir string) Bundle {
	return Bundle{
		Dir:              dir,
		ServingHosts:     append(ServiceHosts("nodeguard-webhook", "nodeguard", "cluster.local"), "10.96.0.40"),
		ClientCommonName: "kube-apiserver",
		CAValidity:       10 * year,
		CertValidity:     year,
	}
}

var allFiles = []string{
	WebhookCACertFile, WebhookCAKeyFile, ClientCACertFile, ClientCAKeyFile,
	WebhookServingCertFile, WebhookServingKeyFile, ClientCertFile, ClientKeyFile,
}

func TestWriteBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	written, err := WriteBundle(testBundle(dir))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range allFiles {
		want = append(want, filepath.Join(dir, name))
	}
	if !slices.Equal(written, want) {
		t.Errorf("written %v, want %v", written, want)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v; want mode 0700", info, err)
	}
	for _, name := range allFiles {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		wantPerm := os.FileMode(0o644)
		if filepath.Ext(name) == ".key" {
			wantPerm = 0o600
		}
		if info.Mode().Perm() != wantPerm {
			t.Errorf("%s: mode %v, want %v", name, info.Mode().Perm(), wantPerm)
		}
	}

	webhookCA := loadCA(t, dir, WebhookCACertFile, WebhookCAKeyFile)
	clientCA := loadCA(t, dir, ClientCACertFile, ClientCAKeyFile)
	serving := parseOne(t, readFile(t, dir, WebhookServingCertFile))
	for _, host := range []string{"nodeguard-webhook", "nodeguard-webhook.nodeguard", "nodeguard-webhook.nodeguard.svc", "nodeguard-webhook.nodeguard.svc.cluster.local", "10.96.0.40"} {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: host, Roots: webhookCA.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	client := parseOne(t, readFile(t, dir, ClientCertFile))
	if client.Subject.CommonName != "kube-apiserver" {
		t.Errorf("client certificate CN %q, want kube-apiserver", client.Subject.CommonName)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: clientCA.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	// The point of two CAs: the serving side cannot mint the apiserver's identity.
	if _, err := client.Verify(x509.VerifyOptions{Roots: webhookCA.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the client certificate verifies against the serving CA")
	}
}

func TestWriteBundleNeverReplacesWithoutOverwrite(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, ClientKeyFile)
	if err := os.WriteFile(existing, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	written, err := WriteBundle(testBundle(dir))
	var existErr *ExistError
	if !errors.As(err, &existErr) || !errors.Is(err, fs.ErrExist) || !slices.Equal(existErr.Paths, []string{existing}) {
		t.Fatalf("WriteBundle over an existing file: error %v, want an ExistError naming %s", err, existing)
	}
	if len(written) != 0 {
		t.Errorf("wrote %v before refusing", written)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after a refusal, want only the existing file", len(entries))
	}
	if got := readFile(t, dir, ClientKeyFile); string(got) != "precious" {
		t.Errorf("existing file changed to %q", got)
	}

	b := testBundle(dir)
	b.Overwrite = true
	if _, err := WriteBundle(b); err != nil {
		t.Fatalf("WriteBundle with Overwrite: %v", err)
	}
	if got := readFile(t, dir, ClientKeyFile); string(got) == "precious" {
		t.Error("Overwrite did not replace the file")
	}
}

func TestWriteBundleReusingCAs(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteBundle(testBundle(dir)); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, name := range allFiles {
		before[name] = readFile(t, dir, name)
	}

	reuse := testBundle(dir)
	reuse.ReuseCAs = true
	if _, err := WriteBundle(reuse); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("reusing the CAs over existing leaves without Overwrite: error %v, want fs.ErrExist", err)
	}
	reuse.Overwrite = true
	written, err := WriteBundle(reuse)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 4 {
		t.Errorf("wrote %v, want the four leaf files only", written)
	}
	for _, name := range allFiles {
		same := bytes.Equal(before[name], readFile(t, dir, name))
		isCA := slices.Contains([]string{WebhookCACertFile, WebhookCAKeyFile, ClientCACertFile, ClientCAKeyFile}, name)
		if same != isCA {
			t.Errorf("%s: unchanged %v, want unchanged only for CA files", name, same)
		}
	}
	webhookCA := loadCA(t, dir, WebhookCACertFile, WebhookCAKeyFile)
	if _, err := parseOne(t, readFile(t, dir, WebhookServingCertFile)).Verify(x509.VerifyOptions{DNSName: "nodeguard-webhook.nodeguard.svc", Roots: webhookCA.CertPool()}); err != nil {
		t.Errorf("renewed serving certificate does not chain to the kept CA: %v", err)
	}
}

func TestWriteBundleRefuses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Bundle)
	}{
		{"no directory", func(b *Bundle) { b.Dir = "" }},
		{"no hosts", func(b *Bundle) { b.ServingHosts = nil }},
		{"no client name", func(b *Bundle) { b.ClientCommonName = "" }},
		{"certificates outliving the CAs", func(b *Bundle) { b.CertValidity = 11 * year }},
		{"reusing CAs that are not there", func(b *Bundle) { b.ReuseCAs = true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			b := testBundle(dir)
			tt.mutate(&b)
			if _, err := WriteBundle(b); err == nil {
				t.Fatal("want an error")
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused bundle left %s behind (%v)", dir, err)
			}
		})
	}
}

func loadCA(t *testing.T, dir, certName, keyName string) *CA {
	t.Helper()
	ca, err := LoadCA(readFile(t, dir, certName), readFile(t, dir, keyName))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
