package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
)

// rolloutKind names a rollout in the output as kubectl would.
const rolloutKind = "kubeletconfigrollout.nodeguard.dev"

func newRolloutCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer a KubeletConfigRollout",
		Long: `Follow and steer a KubeletConfigRollout (nodeguard.dev/v1alpha1, cluster-scoped),
which rolls one eligible ConfigMap out across the Nodes its selector picks, a
few at a time, and stops on the first failure; see docs/rollouts.md.

  status  the rollout's state, conditions and how each selected Node stands
  pause   stop new assignments (spec.paused: true)
  resume  let it go on (spec.paused: false)
  undo    pause it, then put every Node it moved back on its previous source

The rollout controller does the rollout itself; these commands read what it
and the agents wrote, and write only spec.paused and, for undo, the Nodes'
nodeguard.dev/ annotations.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRolloutStatusCommand(e), newRolloutPauseCommand(e, true), newRolloutPauseCommand(e, false), newRolloutUndoCommand(e))
	return cmd
}

// oneRolloutName is the argument check of the commands that take NAME.
func oneRolloutName(_ *cobra.Command, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return usagef("give the name of one KubeletConfigRollout")
	}
	return nil
}

// getRollout reads a rollout.
func getRollout(ctx context.Context, client nodeguardclient.KubeletConfigRolloutInterface, name string) (*v1alpha1.KubeletConfigRollout, error) {
	r, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Also what a cluster without the CRD answers.
			return nil, fmt.Errorf("KubeletConfigRollout %q not found (is the CRD installed?): %w", name, err)
		}
		return nil, fmt.Errorf("getting KubeletConfigRollout %q: %w", name, err)
	}
	return r, nil
}

// listRollouts reads every rollout, to tell which of them share a Node.
func listRollouts(ctx context.Context, client nodeguardclient.KubeletConfigRolloutInterface) ([]*v1alpha1.KubeletConfigRollout, error) {
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing KubeletConfigRollouts: %w", err)
	}
	out := make([]*v1alpha1.KubeletConfigRollout, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// patchPaused sets spec.paused with a JSON merge patch of that field
// alone, so that nothing else of the spec is overwritten from what was
// read, and returns the rollout as written (or as it would be, in a dry
// run).
func patchPaused(ctx context.Context, client nodeguardclient.KubeletConfigRolloutInterface, name string, paused, dryRun bool) (*v1alpha1.KubeletConfigRollout, error) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"paused": paused}})
	if err != nil {
		return nil, fmt.Errorf("building the patch: %w", err)
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	r, err := client.Patch(ctx, name, types.MergePatchType, patch, opts)
	if err != nil {
		return nil, fmt.Errorf("setting spec.paused of KubeletConfigRollout %q to %v: %w", name, paused, err)
	}
	return r, nil
}
