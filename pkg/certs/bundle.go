package certs

import (
	"errors"
	"fmt"
	"github.com/nodeguard/nodeguard/pkg/durable"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files of a bundle directory. The names are part of the install
// instructions: the static-certs overlay reads the public ones, and the
// control-plane templates name webhook-ca.crt and apiserver-client.{crt,key}.
const (
	WebhookCACertFile      = "webhook-ca.crt"
	WebhookCAKeyFile       = "webhook-ca.key"
	WebhookServingCertFile = "webhook-serving.crt"
	WebhookServingKeyFile  = "webhook-serving.key"
	ClientCACertFile       = "apiserver-client-ca.crt"
	ClientCAKeyFile        = "apiserver-client-ca.key"
	ClientCertFile         = "apiserver-client.crt"
	ClientKeyFile          = "apiserver-client.key"
)

// Common names of the two CAs a bundle creates.
const (
	WebhookCACommonName = "nodeguard-webhook-ca"
	ClientCACommonName  = "nodeguard-apiserver-client-ca"
)

// Bundle describes the certificates WriteBundle makes.
type Bundle struct {
	// Dir receives the files; it is created (mode 0700) if missing.
	Dir string
	// ServingHosts are the DNS names and IP addresses the webhook's serving
	// certificate is valid for; see ServiceHosts.
	ServingHosts []string
	// ClientCommonName is the user name in the apiserver's client
	// certificate. The webhook checks only that the certificate chains to
	// its client CA, so the name is for the humans reading logs.
	ClientCommonName string
	// CAValidity and CertValidity are how long the CAs and the leaf
	// certificates are valid.
	CAValidity   time.Duration
	CertValidity time.Duration
	// ReuseCAs loads both CAs from Dir instead of creating them, so that the
	// new leaf certificates chain to CAs the cluster already trusts: the
	// CA files are read, never written.
	ReuseCAs bool
	// Overwrite replaces files that exist. Without it, WriteBundle writes
	// nothing when any file it would write exists.
	Overwrite bool
}

// ExistError lists files WriteBundle would have replaced.
type ExistError struct{ Paths []string }

func (e *ExistError) Error() string {
	return fmt.Sprintf("not replacing existing files: %s", strings.Join(e.Paths, ", "))
}

// Is makes errors.Is(err, fs.ErrExist) true.
func (e *ExistError) Is(target error) bool { return target == fs.ErrExist }

// ServiceHosts are the names a Service is reached by from inside the
// cluster: name, name.namespace, name.namespace.svc and the fully qualified
// name.namespace.svc.<clusterDomain>. kube-apiserver calls admission webhooks
// as name.namespace.svc.
func ServiceHosts(service, namespace, clusterDomain string) []string {
	svc := service + "." + namespace + ".svc"
	return []string{service, service + "." + namespace, svc, svc + "." + clusterDomain}
}

type pemFile struct {
	name string
	data []byte
	perm os.FileMode
}

// WriteBundle mints the webhook's serving certificate and the apiserver's
// client certificate (and, unless ReuseCAs, the two CAs that sign them) and
// writes them into b.Dir: certificates 0644, keys 0600. It returns the paths
// it wrote. Everything is minted before the first file is written.
func WriteBundle(b Bundle) ([]string, error) {
	if b.Dir == "" {
		return nil, errors.New("no output directory")
	}
	files, err := mint(b)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", b.Dir, err)
	}
	if !b.Overwrite {
		var existing []string
		for _, f := range files {
			path := filepath.Join(b.Dir, f.name)
			if _, err := os.Lstat(path); err == nil {
				existing = append(existing, path)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("checking %s: %w", path, err)
			}
		}
		if len(existing) > 0 {
			return nil, &ExistError{Paths: existing}
		}
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(b.Dir, f.name)
		if err := writeFile(path, f.data, f.perm, b.Overwrite); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	if err := durable.SyncDir(b.Dir); err != nil {
		return written, err
	}
	return written, nil
}

func mint(b Bundle) ([]pemFile, error) {
	var files []pemFile
	webhookCA, clientCA, err := loadOrCreateCAs(b)
	if err != nil {
		return nil, err
	}
	if !b.ReuseCAs {
		for _, ca := range []struct {
			ca                *CA
			certName, keyName string
		}{{webhookCA, WebhookCACertFile, WebhookCAKeyFile}, {clientCA, ClientCACertFile, ClientCAKeyFile}} {
			keyPEM, err := ca.ca.KeyPEM()
			if err != nil {
				return nil, err
			}
			files = append(files, pemFile{ca.certName, ca.ca.CertPEM(), 0o644}, pemFile{ca.keyName, keyPEM, 0o600})
		}
	}
	servingCert, servingKey, err := webhookCA.IssueServingCert(b.CertValidity, b.ServingHosts...)
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: %w", err)
	}
	clientCert, clientKey, err := clientCA.IssueClientCert(b.CertValidity, b.ClientCommonName)
	if err != nil {
		return nil, fmt.Errorf("apiserver client certificate: %w", err)
	}
	return append(files,
		pemFile{WebhookServingCertFile, servingCert, 0o644}, pemFile{WebhookServingKeyFile, servingKey, 0o600},
		pemFile{ClientCertFile, clientCert, 0o644}, pemFile{ClientKeyFile, clientKey, 0o600},
	), nil
}

func loadOrCreateCAs(b Bundle) (webhookCA, clientCA *CA, err error) {
	if b.ReuseCAs {
		if webhookCA, err = loadCAFiles(b.Dir, WebhookCACertFile, WebhookCAKeyFile); err != nil {
			return nil, nil, err
		}
		if clientCA, err = loadCAFiles(b.Dir, ClientCACertFile, ClientCAKeyFile); err != nil {
			return nil, nil, err
		}
		return webhookCA, clientCA, nil
	}
	if webhookCA, err = NewCA(WebhookCACommonName, b.CAValidity); err != nil {
		return nil, nil, err
	}
	if clientCA, err = NewCA(ClientCACommonName, b.CAValidity); err != nil {
		return nil, nil, err
	}
	return webhookCA, clientCA, nil
}

func loadCAFiles(dir, certName, keyName string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certPath, keyPath, err)
	}
	return ca, nil
}
