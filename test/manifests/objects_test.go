package manifests

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/certs"
)

func (o objects) deepCopy() objects {
	out := make(objects, len(o))
	for i, obj := range o {
		out[i] = obj.DeepCopy()
	}
	return out
}

// edit changes the object kind/name through its typed form, in place.
func edit[T any](t *testing.T, o objects, kind, name string, mutate func(*T)) {
	t.Helper()
	obj, err := o.get(kind, name)
	if err != nil {
		t.Fatal(err)
	}
	value, err := typed[T](o, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	mutate(value)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(value)
	if err != nil {
		t.Fatal(err)
	}
	obj.Object = content
}

// mustTyped is typed for test setup, where a missing object is a broken test.
func mustTyped[T any](t *testing.T, o objects, kind, name string) *T {
	t.Helper()
	value, err := typed[T](o, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// The renderings every invariant is checked on.
const (
	base        = "base"
	certManager = "overlays/cert-manager"
	staticCerts = "overlays/static-certs"
)

var renderingNames = []string{base, certManager, staticCerts}

// render renders manifests/<name>. The static-certs overlay needs the files
// nodeguard-certs writes, which are never in the repository: it is rendered
// from a copy of manifests/ with a fresh bundle minted by pkg/certs, as the
// install instructions make it.
func render(t *testing.T, name string) objects {
	t.Helper()
	dir, err := Dir(name)
	if err != nil {
		t.Fatal(err)
	}
	if name == staticCerts {
		dir = copyManifests(t, name)
		if _, err := certs.WriteBundle(certs.Bundle{
			Dir:              filepath.Join(dir, "certs"),
			ServingHosts:     certs.ServiceHosts("nodeguard-webhook", "nodeguard", "cluster.local"),
			ClientCommonName: "kube-apiserver",
			CAValidity:       10 * 365 * 24 * time.Hour,
			CertValidity:     365 * 24 * time.Hour,
		}); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s renders to nothing", name)
	}
	return objs
}

// copyManifests copies manifests/ into a temporary directory, leaving out any
// certificates a developer minted into the static-certs overlay, and returns
// the copy of manifests/<sub>.
func copyManifests(t *testing.T, sub string) string {
	t.Helper()
	src, err := Dir("")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "manifests")
	skip := filepath.Join(src, staticCerts, "certs")
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == skip {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying manifests: %v", err)
	}
	return filepath.Join(dst, sub)
}

func TestStaticCertsNeedsTheCertificates(t *testing.T) {
	_, err := Render(copyManifests(t, staticCerts))
	if err == nil || !strings.Contains(err.Error(), certs.WebhookServingCertFile) {
		t.Errorf("rendering static-certs without certificates: error %v, want one naming %s", err, certs.WebhookServingCertFile)
	}
}
