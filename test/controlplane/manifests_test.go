package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// The values users rely on (docs/reference.md): changing one is a decision, not a typo.
func TestShippedAuthorizationConfig(t *testing.T) {
	config, err := LoadAuthorizationConfig()
	if err != nil {
		t.Fatal(err)
	}
	var chain []string
	for _, a := range config.Authorizers {
		chain = append(chain, a.Type+"/"+a.Name)
	}
	if want := []string{"Webhook/nodeguard.dev", "Node/node", "RBAC/rbac"}; !reflect.DeepEqual(chain, want) {
		t.Fatalf("authorizers = %v, want %v", chain, want)
	}
	webhook := config.Authorizers[0].Webhook
	var conditions []string
	for _, c := range webhook.MatchConditions {
		conditions = append(conditions, c.Expression)
	}
	tests := []struct {
		field string
		got   any
		want  any
	}{
		{"timeout", webhook.Timeout.Duration, 3 * time.Second},
		{"subjectAccessReviewVersion", webhook.SubjectAccessReviewVersion, "v1"},
		{"matchConditionSubjectAccessReviewVersion", webhook.MatchConditionSubjectAccessReviewVersion, "v1"},
		{"failurePolicy", webhook.FailurePolicy, "NoOpinion"},
		{"authorizedTTL", webhook.AuthorizedTTL.Duration, 10 * time.Second},
		{"unauthorizedTTL", webhook.UnauthorizedTTL.Duration, 5 * time.Second},
		{"cacheUnauthorizedRequests", webhook.CacheUnauthorizedRequests != nil && !*webhook.CacheUnauthorizedRequests, true},
		{"connectionInfo.type", webhook.ConnectionInfo.Type, "KubeConfigFile"},
		{"connectionInfo.kubeConfigFile", *webhook.ConnectionInfo.KubeConfigFile, "/etc/kubernetes/nodeguard/authorization-webhook.kubeconfig"},
		{"matchConditions", conditions, []string{"'system:nodes' in request.groups",
			"has(request.resourceAttributes) && request.resourceAttributes.?group.orValue('') == '' && " +
				"(request.resourceAttributes.resource == 'configmaps' || (request.resourceAttributes.resource == 'nodes' && " +
				"request.resourceAttributes.?subresource.orValue('') == 'configz' && request.resourceAttributes.?verb.orValue('') == 'get' && " +
				"request.user == 'system:node:' + request.resourceAttributes.?name.orValue('')))"}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.field, tt.got, tt.want)
		}
	}
}

func TestWriteAuthorizationFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("webhook-ca")
	if err != nil {
		t.Fatal(err)
	}
	webhook := WebhookKubeconfig{
		Server:         "https://127.0.0.1:8443/authorize",
		CABundle:       ca.CertPEM(),
		ClientCertFile: writeFile(t, dir, "client.crt"),
		ClientKeyFile:  writeFile(t, dir, "client.key"),
	}
	path, err := WriteAuthorizationFiles(dir, webhook)
	if err != nil {
		t.Fatal(err)
	}

	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAuthorizationConfig(written)
	if err != nil {
		t.Fatalf("written config does not decode: %v", err)
	}
	if err := validateAuthorizationConfig(got); err != nil {
		t.Fatalf("written config does not validate: %v", err)
	}
	wantKubeconfig := filepath.Join(dir, "authorization-webhook.kubeconfig")
	shipped, err := LoadAuthorizationConfig()
	if err != nil {
		t.Fatal(err)
	}
	shipped.Authorizers[0].Webhook.ConnectionInfo.KubeConfigFile = &wantKubeconfig
	if !reflect.DeepEqual(got, shipped) {
		t.Errorf("written config differs from the shipped one in more than kubeConfigFile:\n got %+v\nwant %+v", got, shipped)
	}

	kubeconfig, err := clientcmd.LoadFromFile(wantKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current := kubeconfig.Contexts[kubeconfig.CurrentContext]
	cluster, user := kubeconfig.Clusters[current.Cluster], kubeconfig.AuthInfos[current.AuthInfo]
	if cluster.Server != webhook.Server {
		t.Errorf("server = %q, want %q", cluster.Server, webhook.Server)
	}
	if !bytes.Equal(cluster.CertificateAuthorityData, webhook.CABundle) {
		t.Error("certificate-authority-data is not the given CA bundle")
	}
	if user.ClientCertificate != webhook.ClientCertFile || user.ClientKey != webhook.ClientKeyFile {
		t.Errorf("client cert/key = %q/%q, want %q/%q", user.ClientCertificate, user.ClientKey, webhook.ClientCertFile, webhook.ClientKeyFile)
	}
}

func TestWriteAuthorizationFilesRejects(t *testing.T) {
	ca, err := NewCA("webhook-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name    string
		webhook WebhookKubeconfig
		wantErr string
	}{
		{
			name:    "no server",
			webhook: WebhookKubeconfig{CABundle: ca.CertPEM()},
			wantErr: "Server and CABundle are required",
		},
		{
			name:    "cert without key",
			webhook: WebhookKubeconfig{Server: "https://127.0.0.1:1/authorize", CABundle: ca.CertPEM(), ClientCertFile: writeFile(t, dir, "c.crt")},
			wantErr: "both ClientCertFile and ClientKeyFile",
		},
		{
			name:    "client cert file missing",
			webhook: WebhookKubeconfig{Server: "https://127.0.0.1:1/authorize", CABundle: ca.CertPEM(), ClientCertFile: "/nonexistent/c.crt", ClientKeyFile: "/nonexistent/c.key"},
			wantErr: "/nonexistent/c.crt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WriteAuthorizationFiles(t.TempDir(), tt.webhook)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWriteAuthorizationConfigNeedsKubeconfig(t *testing.T) {
	_, err := WriteAuthorizationConfig(t.TempDir(), "/nonexistent/webhook.kubeconfig")
	if err == nil || !strings.Contains(err.Error(), "kubeConfigFile") {
		t.Errorf("error = %v, want a validation error about kubeConfigFile", err)
	}
}

func TestDecodeAuthorizationConfigIsStrict(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{name: "unknown field", yaml: "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers: []\nextra: 1\n"},
		{name: "duplicate field", yaml: "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers: []\nauthorizers: []\n"},
		{name: "older version", yaml: "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthorizationConfiguration\nauthorizers: []\n"},
		{name: "other kind", yaml: "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"},
		{name: "not YAML", yaml: "{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeAuthorizationConfig([]byte(tt.yaml)); err == nil {
				t.Error("decoded without error")
			}
		})
	}
	valid := "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- type: RBAC\n  name: rbac\n"
	config, err := decodeAuthorizationConfig([]byte(valid))
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if err := validateAuthorizationConfig(config); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	config.Authorizers[0].Name = "my-rbac"
	if err := validateAuthorizationConfig(config); err == nil {
		t.Error("an RBAC authorizer not named rbac validated; kube-apiserver refuses it")
	}
}

func TestExpandPlaceholders(t *testing.T) {
	values := map[string]string{"A": "1", "B": "two"}
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "values", in: "a: ${A}\nb: ${B}\n", want: "a: 1\nb: two\n"},
		{name: "comments untouched", in: "# ${UNKNOWN} $(cmd)\na: ${A}\n", want: "# ${UNKNOWN} $(cmd)\na: 1\n"},
		{name: "unknown placeholder", in: "a: ${C}\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expandPlaceholders([]byte(tt.in), values)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// hack/testbin.sh keys the cache by the version in hack/tools/kube/go.mod and DefaultBinDir by
// KubernetesVersion; if they drift, tests look for binaries the script never built.
func TestKubernetesVersionMatchesToolsModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "hack", "tools", "kube", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var found string
	for line := range strings.Lines(string(goMod)) {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" {
			found = fields[1]
			break
		}
	}
	if found != KubernetesVersion {
		t.Errorf("hack/tools/kube builds k8s.io/kubernetes %q, KubernetesVersion is %q", found, KubernetesVersion)
	}
}

func writeFile(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("placeholder"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
