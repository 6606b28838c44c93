package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// defaultPauseWait is how long undo waits for the controller to show the
// pause: it writes the status within moments of a spec change, so this
// is long enough for a busy controller and short enough to wait out when
// none runs.
const defaultPauseWait = 30 * time.Second

type rolloutUndoOptions struct {
	dryRun  string
	timeout time.Duration
}

func newRolloutUndoCommand(e *env) *cobra.Command {
	o := &rolloutUndoOptions{}
	cmd := &cobra.Command{
		Use:   "undo NAME",
		Short: "Pause a KubeletConfigRollout and put the Nodes it moved back on their previous sources",
		Long: `Undo the KubeletConfigRollout NAME: pause it, then re-point every Node it moved
back to the source it had before, as a revert (onFailure: Revert) would.

A Node the rollout moved carries its bookkeeping: nodeguard.dev/rollout=NAME,
and nodeguard.dev/previous-config-source with its nodeguard.dev/config-source
as it was before (absent when it had none). Undo sets config-source back to
that previous source, or removes it when there was none (so a legacy
spec.configSource is read again), and removes both bookkeeping annotations,
the trial mark (nodeguard.dev/trial-passed) and the drain mode
(nodeguard.dev/drain), in one JSON merge patch per Node carrying the Node's resourceVersion; a Node that
changed since it was read is read again and judged again. A Node whose
config-source no longer names the rollout's target (spec.configMapRef or
status.target) was re-pointed by someone since and is left as it is. Nodes
the selector no longer picks are undone too: their bookkeeping says this
rollout moved them.

The pause comes first so that the controller does not assign the target again
to the Nodes undo takes back: a paused rollout assigns nothing, and its only
writes on Nodes are the reverts a failure calls for, which re-point the same
Nodes to the same sources (the resourceVersion preconditions keep the two from
overwriting each other). Undo then waits, up to --timeout, for the
controller's status to show the pause (status.observedGeneration at the
paused generation and Paused=True): once it does, no assignment decided
before the pause is still on its way. Without a controller running it reverts
after --timeout, with a warning.

The rollout stays paused. Resuming it rolls its target out again from the
canary; to roll out something else, change spec.configMapRef, or delete the
rollout (which leaves every Node as it is).

Each Node changed is printed as "node/NAME: FROM -> TO: reverted"; one left
alone says why.

Needs: get and patch on kubeletconfigrollouts.nodeguard.dev; list, get and
patch on nodes.`,
		Example: `  # See what it would change, writing nothing
  kubectl nodeguard rollout undo pool-blue --dry-run
  # Undo
  kubectl nodeguard rollout undo pool-blue
  # No controller running: do not wait for it
  kubectl nodeguard rollout undo pool-blue --timeout=0`,
		Args: oneRolloutName,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.dryRun {
			case dryRunNone, dryRunClient, dryRunServer:
			default:
				return usagef("invalid --dry-run %q: use none, client or server", o.dryRun)
			}
			if o.timeout < 0 {
				return usagef("--timeout must not be negative")
			}
			return runRolloutUndo(cmd, e, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.dryRun, "dry-run", dryRunNone, `"none" pauses and writes; "client" prints what would change, sending nothing; "server" sends the pause and the Node patches with dryRun=All, so the apiserver and nodeguard's admission webhook judge them without anything being written. --dry-run alone means "client"`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunClient
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultPauseWait, "How long to wait for the rollout controller to show the pause before reverting; 0 does not wait")
	return cmd
}

// undone is what came of one Node.
type undone struct {
	node     string
	from, to string
	// skipped says why the Node was left as it is.
	skipped string
	err     error
}

func runRolloutUndo(cmd *cobra.Command, e *env, o *rolloutUndoOptions, name string) error {
	ctx := cmd.Context()
	kube, err := e.client()
	if err != nil {
		return err
	}
	rollouts, err := e.rollouts()
	if err != nil {
		return err
	}
	r, err := getRollout(ctx, rollouts, name)
	if err != nil {
		return err
	}
	out := e.streams.Out
	switch {
	case r.Spec.Paused:
		fmt.Fprintf(out, "%s/%s: already paused\n", rolloutKind, name)
	case o.dryRun == dryRunClient:
		fmt.Fprintf(out, "%s/%s: would be paused\n", rolloutKind, name)
	default:
		paused, err := patchPaused(ctx, rollouts, name, true, o.dryRun == dryRunServer)
		if err != nil {
			return err
		}
		if o.dryRun == dryRunServer {
			fmt.Fprintf(out, "%s/%s: pause accepted by the server (dry run)\n", rolloutKind, name)
		} else {
			r = paused
			fmt.Fprintf(out, "%s/%s: paused\n", rolloutKind, name)
		}
	}
	if o.dryRun == dryRunNone && o.timeout > 0 {
		if r, err = waitPauseShown(ctx, e, rollouts, r, o.timeout); err != nil {
			return err
		}
	}

	// Every Node, not the selected ones: the bookkeeping, not the
	// selector, says which Nodes this rollout moved.
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var results []undone
	for i := range list.Items {
		if list.Items[i].Annotations[contract.RolloutAnnotation] == name {
			results = append(results, undoNode(ctx, kube, r, &list.Items[i], o.dryRun))
		}
	}
	refused, failed := printUndone(out, results, o.dryRun)
	if o.dryRun == dryRunNone {
		fmt.Fprintf(out, "%s/%s stays paused: resuming it rolls %s/%s out again from the canary\n",
			rolloutKind, name, r.Spec.ConfigMapRef.Namespace, r.Spec.ConfigMapRef.Name)
	}
	switch {
	case failed > 0:
		return fmt.Errorf("%d node(s) could not be reverted (see above)", failed)
	case refused > 0:
		return fmt.Errorf("%d node(s) %w (see above)", refused, errRefused)
	}
	return nil
}

// waitPauseShown polls the rollout until its status is of the paused
// generation and says Paused=True, and returns it as last read. The
// controller decides for a rollout on one worker at a time, and a sync
// returns only once its status write and Node patches have all returned,
// so once it shows the pause every assignment decided before the pause has
// been written, and undo's list of Nodes sees it.
func waitPauseShown(ctx context.Context, e *env, rollouts nodeguardclient.KubeletConfigRolloutInterface, r *v1alpha1.KubeletConfigRollout, timeout time.Duration) (*v1alpha1.KubeletConfigRollout, error) {
	shown := func(r *v1alpha1.KubeletConfigRollout) bool {
		return r.Status.ObservedGeneration >= r.Generation && meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionPaused)
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !shown(r) {
		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for the controller to show the pause: %w", ctx.Err())
			}
			fmt.Fprintf(e.streams.ErrOut, "Warning: the rollout controller has not shown the pause in the status within %v (is it running?); "+
				"reverting anyway. Should it have assigned a Node meanwhile, run undo again.\n", timeout)
			return r, nil
		case <-time.After(e.poll):
		}
		latest, err := getRollout(waitCtx, rollouts, r.Name)
		switch {
		case err == nil:
			r = latest
		case waitCtx.Err() == nil:
			return nil, err
		}
	}
	return r, nil
}

// undoNode reverts one Node with the rollout's own revert (rollout.Undo),
// its resourceVersion as the precondition; on a conflict it reads the Node
// again and judges it again, since whoever changed it may have re-pointed
// or reverted it already.
func undoNode(ctx context.Context, kube kubernetes.Interface, r *v1alpha1.KubeletConfigRollout, node *corev1.Node, dryRun string) undone {
	res := undone{node: node.Name}
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	if dryRun == dryRunServer {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	first := true
	res.err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			latest, err := kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading node %s again: %w", node.Name, err)
			}
			node = latest
		}
		first = false
		res.from, res.skipped = describeAssignment(node), ""
		// What ObserveNode cannot read (the agent's status) does not
		// matter here: Undo looks at the assignment and the bookkeeping.
		obs, _ := rollout.ObserveNode(node, nil)
		change, ok := rollout.Undo(r, &obs)
		if !ok {
			res.skipped = skipReason(r, node)
			return nil
		}
		res.to = describeAssignment(applied(node, change))
		if dryRun == dryRunClient {
			return nil
		}
		patch, err := change.MergePatch()
		if err != nil {
			return err
		}
		_, err = kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, opts)
		return err
	})
	if apierrors.IsNotFound(res.err) {
		res.err, res.skipped = nil, "deleted meanwhile"
	}
	return res
}

// skipReason says why a Node with this rollout's bookkeeping is not undone.
func skipReason(r *v1alpha1.KubeletConfigRollout, node *corev1.Node) string {
	if node.Annotations[contract.RolloutAnnotation] != r.Name {
		return "no longer carries " + contract.RolloutAnnotation + "=" + r.Name + " (reverted meanwhile?)"
	}
	return fmt.Sprintf("its config-source no longer names the rollout's target %s/%s: someone re-pointed it since",
		r.Spec.ConfigMapRef.Namespace, r.Spec.ConfigMapRef.Name)
}

// applied is the Node as it would be after the change, for describing it.
func applied(node *corev1.Node, change rollout.Change) *corev1.Node {
	out := node.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for key, value := range change.Annotations {
		if value == nil {
			delete(out.Annotations, key)
		} else {
			out.Annotations[key] = *value
		}
	}
	return out
}

// printUndone prints a line per Node and a summary, and returns how many
// were refused by the server and how many failed otherwise.
func printUndone(w io.Writer, results []undone, dryRun string) (refused, failed int) {
	var reverted, skipped int
	for _, res := range results {
		switch {
		case res.skipped != "":
			skipped++
			fmt.Fprintf(w, "node/%s: %s: left as it is: %s\n", res.node, res.from, res.skipped)
			continue
		case res.err != nil && isRefusal(res.err):
			refused++
			fmt.Fprintf(w, "node/%s: %s -> %s: refused by the server\n    server: %v\n", res.node, res.from, res.to, res.err)
			continue
		case res.err != nil:
			failed++
			fmt.Fprintf(w, "node/%s: %s -> %s: failed\n    error: %v\n", res.node, res.from, res.to, res.err)
			continue
		}
		reverted++
		word := "reverted"
		switch dryRun {
		case dryRunClient:
			word = "would be reverted"
		case dryRunServer:
			word = "accepted by the server (dry run)"
		}
		fmt.Fprintf(w, "node/%s: %s -> %s: %s\n", res.node, res.from, res.to, word)
	}
	if len(results) == 0 {
		fmt.Fprintln(w, "No Node carries this rollout's bookkeeping: nothing to undo")
		return 0, 0
	}
	summary := fmt.Sprintf("%d node(s) moved by the rollout: %d %s, %d left as it is", len(results), reverted,
		map[string]string{dryRunNone: "reverted", dryRunClient: "would be reverted", dryRunServer: "accepted (dry run)"}[dryRun], skipped)
	if refused+failed > 0 {
		summary += fmt.Sprintf(", %d refused, %d failed", refused, failed)
	}
	switch dryRun {
	case dryRunClient:
		summary += "; dry run (client): nothing was sent"
	case dryRunServer:
		summary += "; dry run (server): nothing was written"
	}
	fmt.Fprintln(w, summary)
	return refused, failed
}
