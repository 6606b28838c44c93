package chart

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodeguard/nodeguard/pkg/certs"
	"github.com/nodeguard/nodeguard/pkg/images"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/manifests"
)

// registry names the images of both renderings.
const registry = "registry.chart.test/nodeguard"

// setting is one way of installing nodeguard, said both ways.
type setting struct {
	name string
	// overlay is the kustomization under manifests/ it installs, and
	// components the components under manifests/ added to it.
	overlay    string
	components []string
	// values are the chart's values for the same (helm flags).
	values []string
	// staticCerts: the overlay reads the certificates nodeguard-certs
	// writes, and the chart gets the same files.
	staticCerts bool
}

// settings are every setting the chart and the overlays share: each
// certificate overlay, alone and with the standalone component, the
// monitoring component and the api-priority component.
var settings = []setting{
	{name: "cert-manager", overlay: "overlays/cert-manager"},
	{name: "static certificates", overlay: "overlays/static-certs", staticCerts: true,
		values: []string{"--set", "certificates.source=static"}},
	{name: "external certificates (base)", overlay: "base",
		values: []string{"--set", "certificates.source=external"}},
	{name: "standalone (external certificates)", overlay: "overlays/standalone",
		values: []string{"--set", "certificates.source=external", "--set", "standalone=true"}},
	{name: "standalone with cert-manager", overlay: "overlays/cert-manager", components: []string{"components/standalone"},
		values: []string{"--set", "standalone=true"}},
	{name: "standalone with static certificates", overlay: "overlays/static-certs", components: []string{"components/standalone"}, staticCerts: true,
		values: []string{"--set", "certificates.source=static", "--set", "standalone=true"}},
	{name: "monitoring with cert-manager", overlay: "overlays/cert-manager", components: []string{"components/monitoring"},
		values: []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true"}},
	{name: "api priority with cert-manager", overlay: "overlays/cert-manager", components: []string{"components/api-priority"},
		values: []string{"--set", "rolloutController.apiPriority.enabled=true"}},
	{name: "monitoring, standalone, static certificates", overlay: "overlays/static-certs", components: []string{"components/standalone", "components/monitoring"}, staticCerts: true,
		values: []string{"--set", "certificates.source=static", "--set", "standalone=true", "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true"}},
}

// TestChartRendersWhatKustomizeRenders: for every setting, `helm template`
// of the chart and `kubectl kustomize` of the overlay give the same objects,
// field for field.
func TestChartRendersWhatKustomizeRenders(t *testing.T) {
	fixture := newFixture(t)
	for _, s := range settings {
		t.Run(s.name, func(t *testing.T) {
			kustomized, how := fixture.kustomize(t, s)
			flags := append(fixture.chartFlags(s), s.values...)
			charted, err := Template(flags...)
			if err != nil {
				t.Fatal(err)
			}
			if diffs := Compare(kustomized, charted); len(diffs) > 0 {
				t.Errorf("the chart (helm template charts/nodeguard %s) and the overlay (%s) differ; change both, so that they install the same:\n%s",
					strings.Join(flags, " "), how, strings.Join(diffs, "\n"))
			}
		})
	}
}

// Compare lists the differences between what kustomize rendered and what
// the chart rendered: objects only one of them has, and for each object both
// have, its differing fields (cmp's diff: - kustomize, + chart).
func Compare(kustomized, charted []*unstructured.Unstructured) []string {
	var diffs []string
	for _, o := range kustomized {
		diffs = append(diffs, canonicalBytes(o, "kustomize")...)
	}
	for _, o := range charted {
		diffs = append(diffs, canonicalBytes(o, "the chart")...)
	}
	byKey := func(objs []*unstructured.Unstructured) (map[string]*unstructured.Unstructured, []string) {
		m := map[string]*unstructured.Unstructured{}
		var dups []string
		for _, o := range objs {
			if _, ok := m[Key(o)]; ok {
				dups = append(dups, Key(o))
			}
			m[Key(o)] = o
		}
		return m, dups
	}
	k, kdups := byKey(kustomized)
	c, cdups := byKey(charted)
	for _, d := range kdups {
		diffs = append(diffs, "kustomize renders "+d+" twice")
	}
	for _, d := range cdups {
		diffs = append(diffs, "the chart renders "+d+" twice")
	}
	for _, key := range Keys(kustomized) {
		if _, ok := c[key]; !ok {
			diffs = append(diffs, "only kustomize renders "+key)
		}
	}
	for _, key := range Keys(charted) {
		kobj, ok := k[key]
		if !ok {
			diffs = append(diffs, "only the chart renders "+key)
			continue
		}
		if d := cmp.Diff(kobj.Object, c[key].Object); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s differs (- kustomize, + chart):\n%s", key, d))
		}
	}
	return diffs
}

// canonicalBytes rewrites the fields the API reads as bytes (a Secret's
// data, a webhook's caBundle) in one base64 form: kustomize wraps its
// base64 at 76 columns, helm's b64enc does not, and the apiserver decodes
// both to the same bytes. It lists what does not decode.
func canonicalBytes(obj *unstructured.Unstructured, who string) []string {
	var bad []string
	canonical := func(path string, value any) any {
		s, ok := value.(string)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s renders %s %s as %T, not base64", who, Key(obj), path, value))
			return value
		}
		data, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(s))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s renders %s %s as invalid base64: %v", who, Key(obj), path, err))
			return value
		}
		return base64.StdEncoding.EncodeToString(data)
	}
	switch obj.GetKind() {
	case "Secret":
		if data, ok := obj.Object["data"].(map[string]any); ok {
			for k, v := range data {
				data[k] = canonical("data."+k, v)
			}
		}
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		webhooks, _ := obj.Object["webhooks"].([]any)
		for i, w := range webhooks {
			cc, ok := w.(map[string]any)["clientConfig"].(map[string]any)
			if ca, found := cc["caBundle"]; ok && found {
				cc["caBundle"] = canonical(fmt.Sprintf("webhooks[%d].clientConfig.caBundle", i), ca)
			}
		}
	}
	return bad
}

// fixture is what both renderings read: a copy of manifests/ (so that the
// static-certs overlay finds certificates in its certs/), the certificates,
// and the images as `make images` describes them to each.
type fixture struct {
	dir string
	// component is the images component, values the chart's values file
	// for the same images.
	component, values string
	certDir           string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: t.TempDir()}
	if err := os.CopyFS(filepath.Join(f.dir, "manifests"), os.DirFS(filepath.Join(root, "manifests"))); err != nil {
		t.Fatal(err)
	}
	f.certDir = filepath.Join(f.dir, "manifests", "overlays", "static-certs", "certs")
	if _, err := certs.WriteBundle(certs.Bundle{
		Dir:              f.certDir,
		ServingHosts:     certs.ServiceHosts("nodeguard-webhook", "nodeguard", "cluster.local"),
		ClientCommonName: "kube-apiserver",
		CAValidity:       24 * time.Hour,
		CertValidity:     time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	f.component = filepath.Join(f.dir, "images")
	f.values = filepath.Join(f.component, images.ValuesFile)
	built := FakeBuilt()
	info := images.SourceInfo{Version: "v0.0.0-chart-test", Revision: "chart-test"}
	if err := os.MkdirAll(f.component, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := images.WriteComponent(filepath.Join(f.component, images.ComponentFile), registry, info, built); err != nil {
		t.Fatal(err)
	}
	if err := images.WriteValues(f.values, registry, info, built); err != nil {
		t.Fatal(err)
	}
	return f
}

// FakeBuilt stands for a build of the three images: one digest each.
func FakeBuilt() []images.Built {
	var built []images.Built
	for i, p := range images.Programs() {
		built = append(built, images.Built{Program: p, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(fmt.Sprintf("%x", i+10), 64)}})
	}
	return built
}

// kustomize renders the setting's overlay with its components and the
// images component, as an operator's own kustomization would, and says how.
func (f *fixture) kustomize(t *testing.T, s setting) ([]*unstructured.Unstructured, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "install")
	var components []string
	for _, c := range s.components {
		components = append(components, filepath.Join(f.dir, "manifests", c))
	}
	components = append(components, f.component)
	if err := manifests.WriteKustomization(dir, filepath.Join(f.dir, "manifests", s.overlay), components...); err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	how := "kubectl kustomize of manifests/" + s.overlay
	for _, c := range s.components {
		how += " + manifests/" + c
	}
	return objs, how + " + the images component"
}

// chartFlags are the values every setting shares: the images, and the
// certificate files where the setting has them.
func (f *fixture) chartFlags(s setting) []string {
	flags := []string{"-f", f.values}
	if s.staticCerts {
		for key, file := range map[string]string{
			"servingCert":       certs.WebhookServingCertFile,
			"servingKey":        certs.WebhookServingKeyFile,
			"servingCA":         certs.WebhookCACertFile,
			"apiserverClientCA": certs.ClientCACertFile,
		} {
			flags = append(flags, "--set-file", "certificates.static."+key+"="+filepath.Join(f.certDir, file))
		}
	}
	return flags
}
