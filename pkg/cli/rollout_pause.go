package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
)

// newRolloutPauseCommand is pause (pause true) or resume (pause false):
// the same write of spec.paused, worded for each.
func newRolloutPauseCommand(e *env, pause bool) *cobra.Command {
	use, short, long, example := "resume NAME", "Let a paused KubeletConfigRollout go on assigning Nodes",
		`Set spec.paused of the KubeletConfigRollout NAME to false, so that the
controller goes on assigning the target to the Nodes still waiting for it.

A resume does not clear a failure: a rollout that failed (Failed=True) stays
failed for its target, paused or not, until the target changes (a new
resourceVersion of the ConfigMap or a new spec.configMapRef). A rollout paused
by 'kubectl nodeguard rollout undo' starts over from the canary when resumed,
since undo took its Nodes back.`,
		`  kubectl nodeguard rollout resume pool-blue`
	if pause {
		use, short, long, example = "pause NAME", "Stop a KubeletConfigRollout from assigning more Nodes",
			`Set spec.paused of the KubeletConfigRollout NAME to true. The controller then
assigns no more Nodes; that is all a pause does. Nodes already trying the
target go on with their trial and their agents may still roll it back, and a
rollout that fails while paused still reverts the Nodes it moved (onFailure:
Revert). 'kubectl nodeguard rollout resume NAME' lets it go on.`,
			`  kubectl nodeguard rollout pause pool-blue
  kubectl nodeguard rollout status pool-blue   # Paused=True once the controller has seen it`
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: long + `

The write is a JSON merge patch of spec.paused alone (field manager
kubectl-nodeguard). When spec.paused is already so, nothing is written and
the command says so; it succeeds either way.

Needs: get and patch on kubeletconfigrollouts.nodeguard.dev.`,
		Example: example,
		Args:    oneRolloutName,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRolloutPause(cmd, e, args[0], pause)
		},
	}
	return cmd
}

func runRolloutPause(cmd *cobra.Command, e *env, name string, pause bool) error {
	ctx := cmd.Context()
	client, err := e.rollouts()
	if err != nil {
		return err
	}
	r, err := getRollout(ctx, client, name)
	if err != nil {
		return err
	}
	word := "resumed"
	if pause {
		word = "paused"
	}
	if r.Spec.Paused == pause {
		fmt.Fprintf(e.streams.Out, "%s/%s: already %s (spec.paused is %v); nothing written\n", rolloutKind, name, word, pause)
	} else {
		if r, err = patchPaused(ctx, client, name, pause, false); err != nil {
			return err
		}
		fmt.Fprintf(e.streams.Out, "%s/%s: %s\n", rolloutKind, name, word)
	}
	if !pause && meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionFailed) {
		fmt.Fprintf(e.streams.Out, "note: the rollout has failed (%s) and stays failed until its target changes; resuming assigns nothing\n",
			meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionFailed).Message)
	}
	return nil
}
