package main

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/cli"
)

// rolloutName is the demonstration's KubeletConfigRollout.
const rolloutName = "pool-blue"

// rolloutManifest is what an operator would `kubectl apply`: the blue pool
// (nodeguard.dev/pool, which the administrator sets and no node may set on
// itself), one canary, one Node at a time, reverted on failure.
func rolloutManifest(configMap string) string {
	return fmt.Sprintf(`apiVersion: nodeguard.dev/v1alpha1
kind: KubeletConfigRollout
metadata:
  name: %s
spec:
  nodeSelector:
    matchLabels: {nodeguard.dev/pool: blue}
  configMapRef: {namespace: %s, name: %s}
  canary: 1
  maxUnavailable: 1
  onFailure: Revert
`, rolloutName, configNamespace, configMap)
}

// createRollout creates the rollout from its manifest, printed as applied.
func (s *story) createRollout(ctx context.Context, configMap string) error {
	manifest := rolloutManifest(configMap)
	s.c.step("creating KubeletConfigRollout %s:\n%s", rolloutName, indent(manifest))
	var r v1alpha1.KubeletConfigRollout
	if err := yaml.UnmarshalStrict([]byte(manifest), &r); err != nil {
		return fmt.Errorf("reading the rollout's manifest: %w", err)
	}
	if _, err := s.rollouts.Create(ctx, &r, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating KubeletConfigRollout %s: %w", rolloutName, err)
	}
	return nil
}

// retarget points the rollout at another ConfigMap, as editing its
// spec.configMapRef.name would.
func (s *story) retarget(ctx context.Context, configMap string) error {
	s.c.step("pointing KubeletConfigRollout %s at %s/%s (spec.configMapRef.name)", rolloutName, configNamespace, configMap)
	patch := fmt.Appendf(nil, `{"spec":{"configMapRef":{"name":%q}}}`, configMap)
	if _, err := s.rollouts.Patch(ctx, rolloutName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("retargeting KubeletConfigRollout %s: %w", rolloutName, err)
	}
	return nil
}

// rolloutStatus follows the rollout with `kubectl nodeguard rollout status
// --watch` until it is Complete (failed false) or Failed (failed true,
// exit code 3), then prints it once more.
func (s *story) rolloutStatus(ctx context.Context, failed bool) error {
	want := cli.ExitOK
	if failed {
		want = cli.ExitRolloutFailed
	}
	if err := s.kubectlExit(ctx, want, "rollout", "status", rolloutName, "--watch", "--timeout", waitTimeout.String()); err != nil {
		return err
	}
	return s.kubectlExit(ctx, want, "rollout", "status", rolloutName)
}

func indent(text string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n    ")
}
