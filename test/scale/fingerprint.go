package scale

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/manifests"
)

// Fingerprint identifies the manifests a mode ran with, since they are
// read when each cluster starts and may change between runs (or during
// one): digests of the authorization configuration the mode installs and
// of the rendered ValidatingWebhookConfiguration, and nodeguard.dev's
// matchConditions.
type Fingerprint struct {
	AuthorizationConfig string `json:"authorization_config_sha256"`
	// AuthorizationMatchConditions are nodeguard.dev's CEL expressions.
	AuthorizationMatchConditions []string `json:"authorization_match_conditions"`
	WebhookConfiguration         string   `json:"validating_webhook_configuration_sha256"`
}

func fingerprint(mode Mode) (Fingerprint, error) {
	var f Fingerprint
	manifest := controlplane.AuthorizationConfigManifest
	if mode == ModeMinVersion {
		manifest = controlplane.MinKubeletVersionAuthorizationConfigManifest
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return f, err
	}
	data, err := os.ReadFile(filepath.Join(root, manifest))
	if err != nil {
		return f, fmt.Errorf("fingerprinting the manifests: %w", err)
	}
	f.AuthorizationConfig = digest(data)
	config, err := controlplane.LoadAuthorizationConfigFrom(manifest)
	if err != nil {
		return f, err
	}
	for _, a := range config.Authorizers {
		if a.Name == controlplane.WebhookAuthorizerName && a.Webhook != nil {
			for _, c := range a.Webhook.MatchConditions {
				f.AuthorizationMatchConditions = append(f.AuthorizationMatchConditions, c.Expression)
			}
		}
	}
	base, err := manifests.Dir("base")
	if err != nil {
		return f, err
	}
	objs, err := manifests.Render(base)
	if err != nil {
		return f, err
	}
	for _, obj := range objs {
		if obj.GetKind() == "ValidatingWebhookConfiguration" {
			data, err := json.Marshal(obj.Object)
			if err != nil {
				return f, fmt.Errorf("fingerprinting %s: %w", obj.GetName(), err)
			}
			f.WebhookConfiguration = digest(data)
		}
	}
	return f, nil
}

// digest is a short hex SHA-256: enough to tell two runs' manifests apart.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}
