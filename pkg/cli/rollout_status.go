package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// rolloutPollInterval paces --watch, and undo's wait for the pause. The controller writes the status a
// few times per Node trial, which lasts minutes, so a read a second costs
// the apiserver little and, unlike a watch, needs no relisting when the
// connection drops.
const rolloutPollInterval = time.Second

// errRolloutFailed marks a rollout whose Failed condition is True.
var errRolloutFailed = errors.New("the rollout has failed")

type rolloutStatusOptions struct {
	watch   bool
	timeout time.Duration
	output  string
}

func newRolloutStatusCommand(e *env) *cobra.Command {
	o := &rolloutStatusOptions{}
	jsonYAML := genericclioptions.NewJSONYamlPrintFlags()
	formats := jsonYAML.AllowedFormats()
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a KubeletConfigRollout's state, conditions and Nodes",
		Long: `Show the KubeletConfigRollout NAME: its state (the reason of its Progressing
condition), the target version, the counts and every condition with its
message, as the rollout controller last wrote them; then a table of the Nodes
its selector picks:

  NODE             the Node
  STATE            Updated, InTrial, Failed, Degraded, Pending, Unavailable,
                   Reverting, Untouched, Conflicted or Skipped (see
                   docs/rollouts.md)
  ASSIGNED         its nodeguard.dev/config-source, as in 'kubectl nodeguard status'
  ACTIVE           what its agent reports running
  LAST-KNOWN-GOOD  what its agent would roll back to
  READY            the Node's Ready condition
  DETAIL           why it counts against maxUnavailable (the phase of a change
                   under way, e.g. "Draining, waiting on default/web-0", not
                   Ready, the KubeletConfigReady condition), the failure a
                   Degraded Node reports of its own, why admission skipped
                   it, or which other rollouts select it

STATE is judged here, now, from the Nodes by the controller's own rules
(pkg/rollout), so it may be a step ahead of the counts in the status.

With --watch the command follows the rollout, printing its state whenever it
changes, until it is Complete or Failed for the current spec (then it prints
the whole status, as without --watch), until it has stopped on its own
(NodesSkipped, NodesInConflict, NodesDegraded, or ProgressDeadlineExceeded, as kubectl rollout
status stops on a Deployment's), or until --timeout.

-o json|yaml prints a ` + RolloutStatusKind + ` (apiVersion ` + RolloutStatusAPIVersion + `): rollout,
generation, spec and status as read, target (the version judged against), and
nodes, each with state, unavailable, detail, ready, the bookkeeping (rollout,
previousConfigSource, drain) and config (an item of 'kubectl nodeguard status
-o json', whose reported status carries the phase and pending pods).
With --watch the progress lines go to standard error and only the final
document to standard output.

The command exits with 3 when the rollout has failed (Failed=True), with or
without --watch, and with 1 when --timeout passes first or, with --watch, when
the rollout exceeded its progress deadline.

Needs: get and list on kubeletconfigrollouts.nodeguard.dev (list, to find the
other rollouts sharing a Node), list on nodes, and get on the target
ConfigMap (without it the Nodes are judged against status.target).`,
		Example: `  kubectl nodeguard rollout status pool-blue
  kubectl nodeguard rollout status pool-blue --watch --timeout=30m
  kubectl nodeguard rollout status pool-blue -o yaml`,
		Args: oneRolloutName,
		RunE: func(cmd *cobra.Command, args []string) error {
			var printer printers.ResourcePrinter
			if o.output != "" {
				p, err := jsonYAML.ToPrinter(o.output)
				if err != nil {
					return usagef("unsupported output format %q: use one of %s", o.output, strings.Join(formats, ", "))
				}
				printer = p
			}
			if o.timeout < 0 {
				return usagef("--timeout must not be negative")
			}
			return runRolloutStatus(cmd, e, o, args[0], printer)
		},
	}
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "Follow the rollout until it is Complete or Failed")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "With --watch, give up after this long (e.g. 30m) and exit with 1; 0 waits for ever")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: one of "+strings.Join(formats, ", ")+"; text when empty")
	return cmd
}

func runRolloutStatus(cmd *cobra.Command, e *env, o *rolloutStatusOptions, name string, printer printers.ResourcePrinter) error {
	ctx := cmd.Context()
	kube, err := e.client()
	if err != nil {
		return err
	}
	rollouts, err := e.rollouts()
	if err != nil {
		return err
	}
	if o.watch {
		progress := e.streams.Out
		if printer != nil {
			progress = e.streams.ErrOut
		}
		if err := waitRolloutDone(ctx, e, o.timeout, name, progress); err != nil {
			return err
		}
	}
	st, err := e.rolloutStatus(ctx, kube, rollouts, name)
	if err != nil {
		return err
	}
	if printer != nil {
		doc, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
		if err != nil {
			return fmt.Errorf("converting the status of rollout %s: %w", name, err)
		}
		doc["apiVersion"], doc["kind"] = RolloutStatusAPIVersion, RolloutStatusKind
		if err := printer.PrintObj(&unstructured.Unstructured{Object: doc}, e.streams.Out); err != nil {
			return fmt.Errorf("printing: %w", err)
		}
	} else if err := printRolloutStatus(e.streams.Out, st); err != nil {
		return err
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		return fmt.Errorf("%w: %s", errRolloutFailed, c.Message)
	}
	return nil
}

// waitRolloutDone polls the rollout until its status, written for the
// current generation, says Complete or Failed, printing the Progressing
// condition each time it changes. A status from an older generation says
// nothing about the spec in force, as with kubectl rollout status.
func waitRolloutDone(ctx context.Context, e *env, timeout time.Duration, name string, progress io.Writer) error {
	rollouts, err := e.rollouts()
	if err != nil {
		return err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var last string
	for {
		r, err := getRollout(ctx, rollouts, name)
		if err != nil {
			if ctx.Err() != nil {
				return waitError(ctx, timeout, name)
			}
			return err
		}
		current := r.Status.ObservedGeneration >= r.Generation
		line := fmt.Sprintf("Waiting for rollout %q: the controller has not seen generation %d yet", name, r.Generation)
		if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing); c != nil && current {
			line = fmt.Sprintf("Waiting for rollout %q: %s: %s", name, c.Reason, c.Message)
		}
		done := current && (meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionComplete) ||
			meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ConditionFailed))
		if done {
			return nil
		}
		if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgressing); c != nil && current {
			switch c.Reason {
			case v1alpha1.ReasonProgressDeadlineExceeded:
				return fmt.Errorf("rollout %q exceeded its progress deadline: %s", name, c.Message)
			case v1alpha1.ReasonNodesSkipped, v1alpha1.ReasonNodesInConflict, v1alpha1.ReasonNodesDegraded:
				// Nothing moves until an administrator acts.
				return nil
			}
		}
		if line != last {
			fmt.Fprintln(progress, line)
			last = line
		}
		select {
		case <-ctx.Done():
			return waitError(ctx, timeout, name)
		case <-time.After(e.poll):
		}
	}
}

func waitError(ctx context.Context, timeout time.Duration, name string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && timeout > 0 {
		return fmt.Errorf("timed out after %v waiting for rollout %q to be Complete or Failed", timeout, name)
	}
	return fmt.Errorf("waiting for rollout %q: %w", name, ctx.Err())
}

var rolloutConditionColumns = []metav1.TableColumnDefinition{
	{Name: "Condition", Type: "string"},
	{Name: "Status", Type: "string"},
	{Name: "Reason", Type: "string"},
	{Name: "Message", Type: "string"},
}

var rolloutNodeColumns = []metav1.TableColumnDefinition{
	{Name: "Node", Type: "string"},
	{Name: "State", Type: "string"},
	{Name: "Assigned", Type: "string"},
	{Name: "Active", Type: "string"},
	{Name: "Last-Known-Good", Type: "string"},
	{Name: "Ready", Type: "string"},
	{Name: "Detail", Type: "string"},
}

// printRolloutStatus prints the text form: a few "Key: value" lines, the
// conditions, the Nodes.
func printRolloutStatus(w io.Writer, st *RolloutStatus) error {
	s := &st.Status
	state := cellNone + " (no status yet: is the rollout controller running?)"
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionProgressing); c != nil {
		state = c.Reason
		if c.Status == metav1.ConditionTrue {
			state += " (progressing)"
		}
	}
	if s.ObservedGeneration < st.Generation {
		state += fmt.Sprintf("; the status is of generation %d, the spec is at %d: the controller has not caught up", s.ObservedGeneration, st.Generation)
	}
	target := st.Spec.ConfigMapRef.Namespace + "/" + st.Spec.ConfigMapRef.Name + " (not rolled out yet)"
	if s.Target != nil {
		target = shortRef(s.Target)
		if s.Target.UID == "" {
			target += " (does not exist)"
		}
	}
	spec := fmt.Sprintf("canary %s, maxUnavailable %s, onFailure %s, drain %s, paused %v",
		optionalInt(st.Spec.Canary, v1alpha1.DefaultCanary), maxUnavailableOf(&st.Spec), orDefault(string(st.Spec.OnFailure), string(v1alpha1.DefaultOnFailure)),
		orDefault(string(st.Spec.Drain), string(v1alpha1.DefaultDrain)), st.Spec.Paused)
	fmt.Fprintf(w, "Rollout:  %s\nState:    %s\nTarget:   %s\nSpec:     %s\nNodes:    %d selected, %d updated, %d in trial, %d failed\n",
		st.Rollout, state, target, spec, s.Selected, s.Updated, s.InTrial, s.Failed)

	conditions := &metav1.Table{ColumnDefinitions: rolloutConditionColumns}
	for _, c := range s.Conditions {
		conditions.Rows = append(conditions.Rows, metav1.TableRow{Cells: []any{c.Type, string(c.Status), c.Reason, c.Message}})
	}
	tp := printers.NewTablePrinter(printers.PrintOptions{})
	if len(conditions.Rows) > 0 {
		fmt.Fprintln(w)
		if err := tp.PrintObj(conditions, w); err != nil {
			return fmt.Errorf("printing: %w", err)
		}
	}

	fmt.Fprintln(w)
	if st.NodesError != "" {
		fmt.Fprintf(w, "Nodes could not all be read: %s\n", st.NodesError)
	}
	if len(st.Nodes) == 0 {
		fmt.Fprintln(w, "No Nodes selected.")
		return nil
	}
	nodes := &metav1.Table{ColumnDefinitions: rolloutNodeColumns}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		nodes.Rows = append(nodes.Rows, metav1.TableRow{Cells: []any{
			n.Node, string(n.State), assignedCell(&n.Config),
			reportedCell(&n.Config, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.Active }),
			reportedCell(&n.Config, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.LastKnownGood }),
			orUnknown(string(n.Ready)), orDefault(n.Detail, cellNone),
		}})
	}
	if err := tp.PrintObj(nodes, w); err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	return nil
}

func optionalInt(v *int32, def int) string {
	if v == nil {
		return fmt.Sprint(def)
	}
	return fmt.Sprint(*v)
}

func maxUnavailableOf(s *v1alpha1.KubeletConfigRolloutSpec) string {
	if s.MaxUnavailable == nil {
		return fmt.Sprint(v1alpha1.DefaultMaxUnavailable)
	}
	return s.MaxUnavailable.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
