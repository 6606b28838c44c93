package controlplane

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	apiserverconfig "k8s.io/apiserver/pkg/apis/apiserver"
	apiserverinstall "k8s.io/apiserver/pkg/apis/apiserver/install"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

// Paths of the shipped control-plane manifests, relative to the repository root.
const (
	AuthorizationConfigManifest = "manifests/control-plane/authorization-config.yaml"
	// MinKubeletVersionAuthorizationConfigManifest is the opt-in
	// configuration that sends every request of a node to the webhook.
	MinKubeletVersionAuthorizationConfigManifest = "manifests/control-plane/authorization-config-min-kubelet-version.yaml"
	WebhookKubeconfigManifest                    = "manifests/control-plane/authorization-webhook.kubeconfig"
)

// WebhookAuthorizerName is the name of nodeguard's entry in the authorization chain.
const WebhookAuthorizerName = "nodeguard.dev"

const modulePath = "github.com/nodeguard/nodeguard"

// RepoRoot returns the root of the nodeguard repository: the nearest directory, from the
// working directory up, whose go.mod declares module github.com/nodeguard/nodeguard.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if declaresModule(filepath.Join(dir, "go.mod"), modulePath) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of module %s in %s or above it; run from inside the repository", modulePath, wd)
		}
	}
}

func declaresModule(goMod, module string) bool {
	data, err := os.ReadFile(goMod)
	if err != nil {
		return false
	}
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module
		}
	}
	return false
}

// WebhookKubeconfig is what the apiserver needs to call the authorization webhook.
type WebhookKubeconfig struct {
	// Server is the webhook's /authorize URL, e.g. https://127.0.0.1:8443/authorize.
	Server string
	// CABundle is the PEM of the CA that signed the webhook's serving certificate.
	CABundle []byte
	// ClientCertFile and ClientKeyFile are the certificate the apiserver presents to the
	// webhook. Both or neither.
	ClientCertFile string
	ClientKeyFile  string
}

// WriteAuthorizationFiles writes the webhook kubeconfig and the authorization configuration
// pointing at it into dir, both made from the shipped manifests, and returns the path of the
// configuration, for Options.AuthorizationConfigFile.
func WriteAuthorizationFiles(dir string, webhook WebhookKubeconfig) (string, error) {
	return WriteAuthorizationFilesFrom(dir, AuthorizationConfigManifest, webhook)
}

// WriteAuthorizationFilesFrom is WriteAuthorizationFiles with the
// authorization configuration read from manifest (a path from the
// repository's root, such as MinKubeletVersionAuthorizationConfigManifest).
func WriteAuthorizationFilesFrom(dir, manifest string, webhook WebhookKubeconfig) (string, error) {
	kubeconfig, err := WriteWebhookKubeconfig(dir, webhook)
	if err != nil {
		return "", err
	}
	return writeAuthorizationConfig(dir, manifest, kubeconfig)
}

// WriteWebhookKubeconfig fills in the shipped webhook kubeconfig template with webhook's CA
// and client certificate, points it at webhook.Server instead of the in-cluster Service, and
// writes it to dir/authorization-webhook.kubeconfig, whose path it returns.
func WriteWebhookKubeconfig(dir string, webhook WebhookKubeconfig) (string, error) {
	if webhook.Server == "" || len(webhook.CABundle) == 0 {
		return "", errors.New("webhook kubeconfig: Server and CABundle are required")
	}
	if (webhook.ClientCertFile == "") != (webhook.ClientKeyFile == "") {
		return "", errors.New("webhook kubeconfig: give both ClientCertFile and ClientKeyFile, or neither")
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	template, err := os.ReadFile(filepath.Join(root, WebhookKubeconfigManifest))
	if err != nil {
		return "", fmt.Errorf("reading webhook kubeconfig template: %w", err)
	}
	filled, err := expandPlaceholders(template, map[string]string{
		"NODEGUARD_CA_BUNDLE":        base64.StdEncoding.EncodeToString(webhook.CABundle),
		"APISERVER_CLIENT_CERT_FILE": webhook.ClientCertFile,
		"APISERVER_CLIENT_KEY_FILE":  webhook.ClientKeyFile,
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", WebhookKubeconfigManifest, err)
	}
	config, err := decodeKubeconfigStrict(filled)
	if err != nil {
		return "", fmt.Errorf("%s: %w", WebhookKubeconfigManifest, err)
	}
	current, ok := config.Contexts[config.CurrentContext]
	if !ok || config.Clusters[current.Cluster] == nil || config.AuthInfos[current.AuthInfo] == nil {
		return "", fmt.Errorf("%s: current-context %q does not name a cluster and a user", WebhookKubeconfigManifest, config.CurrentContext)
	}
	config.Clusters[current.Cluster].Server = webhook.Server
	if err := clientcmd.Validate(*config); err != nil {
		return "", fmt.Errorf("webhook kubeconfig from %s: %w", WebhookKubeconfigManifest, err)
	}
	path := filepath.Join(dir, "authorization-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return "", fmt.Errorf("writing webhook kubeconfig: %w", err)
	}
	return path, nil
}

// expandPlaceholders substitutes ${NAME} outside comment lines, as envsubst would, and fails
// on a name it has no value for, so a new placeholder in the template cannot go unnoticed.
func expandPlaceholders(template []byte, values map[string]string) ([]byte, error) {
	var out bytes.Buffer
	var unknown []string
	for line := range strings.Lines(string(template)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			line = os.Expand(line, func(name string) string {
				value, ok := values[name]
				if !ok {
					unknown = append(unknown, name)
				}
				return value
			})
		}
		out.WriteString(line)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("no value for placeholders %v", unknown)
	}
	return out.Bytes(), nil
}

func decodeKubeconfigStrict(data []byte) (*clientcmdapi.Config, error) {
	codecs := serializer.NewCodecFactory(clientcmdlatest.Scheme, serializer.EnableStrict)
	obj, _, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding kubeconfig: %w", err)
	}
	config, ok := obj.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("decoding kubeconfig: got %T, want a Config", obj)
	}
	return config, nil
}

// WriteAuthorizationConfig loads the shipped authorization configuration, checks it as
// kube-apiserver would, points the nodeguard.dev webhook at webhookKubeconfig (which must
// exist: validation reads it), and writes the result to dir/authorization-config.yaml,
// whose path it returns. Nothing else in the configuration is changed.
func WriteAuthorizationConfig(dir, webhookKubeconfig string) (string, error) {
	return writeAuthorizationConfig(dir, AuthorizationConfigManifest, webhookKubeconfig)
}

func writeAuthorizationConfig(dir, manifest, webhookKubeconfig string) (string, error) {
	config, err := LoadAuthorizationConfigFrom(manifest)
	if err != nil {
		return "", err
	}
	webhook, err := nodeguardWebhook(config)
	if err != nil {
		return "", fmt.Errorf("%s: %w", manifest, err)
	}
	absKubeconfig, err := filepath.Abs(webhookKubeconfig)
	if err != nil {
		return "", fmt.Errorf("resolving webhook kubeconfig path: %w", err)
	}
	webhook.ConnectionInfo.KubeConfigFile = &absKubeconfig
	if err := validateAuthorizationConfig(config); err != nil {
		return "", fmt.Errorf("%s with kubeConfigFile %s: %w", manifest, absKubeconfig, err)
	}
	out, err := encodeAuthorizationConfig(config)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "authorization-config.yaml")
	header := fmt.Sprintf("# Made by test/controlplane from %s; only kubeConfigFile differs.\n", manifest)
	if err := os.WriteFile(path, append([]byte(header), out...), 0o644); err != nil {
		return "", fmt.Errorf("writing authorization config: %w", err)
	}
	return path, nil
}

// LoadAuthorizationConfig decodes the shipped authorization configuration strictly, without
// validating it (its kubeConfigFile exists only on a control-plane node).
func LoadAuthorizationConfig() (*apiserverv1.AuthorizationConfiguration, error) {
	return LoadAuthorizationConfigFrom(AuthorizationConfigManifest)
}

// LoadAuthorizationConfigFrom is LoadAuthorizationConfig for another shipped file, named
// from the repository's root.
func LoadAuthorizationConfigFrom(manifest string) (*apiserverv1.AuthorizationConfiguration, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, manifest))
	if err != nil {
		return nil, fmt.Errorf("reading authorization config: %w", err)
	}
	config, err := decodeAuthorizationConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", manifest, err)
	}
	return config, nil
}

func authorizationScheme() (*runtime.Scheme, serializer.CodecFactory) {
	scheme := runtime.NewScheme()
	apiserverinstall.Install(scheme)
	return scheme, serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}

// decodeAuthorizationConfig accepts only apiserver.config.k8s.io/v1, the version we ship, and
// rejects unknown or duplicated fields.
func decodeAuthorizationConfig(data []byte) (*apiserverv1.AuthorizationConfiguration, error) {
	_, codecs := authorizationScheme()
	obj, gvk, err := codecs.UniversalDecoder(apiserverv1.SchemeGroupVersion).Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	want := apiserverv1.SchemeGroupVersion.WithKind("AuthorizationConfiguration")
	if gvk == nil || *gvk != want {
		return nil, fmt.Errorf("is %v, want %v", gvk, want)
	}
	config, ok := obj.(*apiserverv1.AuthorizationConfiguration)
	if !ok {
		return nil, fmt.Errorf("decoded to %T, want an AuthorizationConfiguration", obj)
	}
	return config, nil
}

func nodeguardWebhook(config *apiserverv1.AuthorizationConfiguration) (*apiserverv1.WebhookConfiguration, error) {
	for i := range config.Authorizers {
		authorizer := &config.Authorizers[i]
		if authorizer.Name == WebhookAuthorizerName && authorizer.Type == string(apiserverv1.TypeWebhook) && authorizer.Webhook != nil {
			return authorizer.Webhook, nil
		}
	}
	return nil, fmt.Errorf("no webhook authorizer named %s", WebhookAuthorizerName)
}

// validateAuthorizationConfig applies the checks kube-apiserver applies when it loads the
// file: the library validation (including compiling matchConditions and reading the
// kubeconfig) and the rule that in-tree authorizers are named after their lower-cased type.
func validateAuthorizationConfig(config *apiserverv1.AuthorizationConfiguration) error {
	scheme, _ := authorizationScheme()
	internal := &apiserverconfig.AuthorizationConfiguration{}
	if err := scheme.Convert(config, internal, nil); err != nil {
		return fmt.Errorf("converting for validation: %w", err)
	}
	knownTypes := sets.New("AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node")
	repeatableTypes := sets.New("Webhook")
	errs := apiservervalidation.ValidateAuthorizationConfiguration(authorizationcel.NewDefaultCompiler(), nil, internal, knownTypes, repeatableTypes).ToAggregate()
	var all []error
	if errs != nil {
		all = append(all, errs)
	}
	for _, authorizer := range internal.Authorizers {
		if authorizer.Type != apiserverconfig.TypeWebhook && authorizer.Name != strings.ToLower(string(authorizer.Type)) {
			all = append(all, fmt.Errorf("authorizer of type %s must be named %q, not %q", authorizer.Type, strings.ToLower(string(authorizer.Type)), authorizer.Name))
		}
	}
	return errors.Join(all...)
}

func encodeAuthorizationConfig(config *apiserverv1.AuthorizationConfiguration) ([]byte, error) {
	_, codecs := authorizationScheme()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return nil, errors.New("encoding authorization config: no YAML serializer")
	}
	out, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, apiserverv1.SchemeGroupVersion), config)
	if err != nil {
		return nil, fmt.Errorf("encoding authorization config: %w", err)
	}
	return out, nil
}
