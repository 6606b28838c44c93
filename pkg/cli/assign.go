package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The --dry-run modes, as kubectl names them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

type changeOptions struct {
	selection nodeSelection
	dryRun    string
}

func addChangeFlags(cmd *cobra.Command, o *changeOptions) {
	cmd.Flags().StringVarP(&o.selection.selector, "selector", "l", "", "Label selector of the nodes to change (e.g. -l nodeguard.dev/pool=blue); not with node names")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", dryRunNone, `"none" writes; "client" runs the checks and prints what would change, sending nothing; "server" also sends the patches with dryRun=All, so the apiserver and nodeguard's admission webhook judge them without anything being written. --dry-run alone means "client"`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunClient
}

func (o *changeOptions) validate() error {
	switch o.dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
	default:
		return usagef("invalid --dry-run %q: use none, client or server", o.dryRun)
	}
	return o.selection.validate(false)
}

const changeHelpCommon = `Nodes are named, or chosen with -l. For each node the output says what
would change (FROM -> TO, or unchanged) and what came of it; the reasons of
any refusal follow, indented: "client check:" for this plugin's checks,
"server:" for the apiserver's answer (nodeguard's admission webhook says
which rule and why). The change is a JSON merge patch of the
nodeguard.dev/config-source annotation and nothing else.`

func newAssignCommand(e *env) *cobra.Command {
	o := &changeOptions{}
	cmd := &cobra.Command{
		Use:   "assign CONFIGMAP (NODE... | -l SELECTOR)",
		Short: "Assign a kubelet configuration (an eligible ConfigMap) to nodes",
		Long: `Assign CONFIGMAP (NAMESPACE/NAME, or NAME in the namespace of -n or of the
kubeconfig context) to nodes by setting their nodeguard.dev/config-source
annotation. Each node's agent then applies it, keeps it on trial and reports
back (see 'kubectl nodeguard status').

Before anything is written, the checks nodeguard's admission webhook makes
for an assignment run here, with the webhook's messages: the "kubelet" key
must decode strictly into a KubeletConfiguration (rule 6), and its feature
gates must be known to, and not locked against, the kubelet version each node
reports in status.nodeInfo.kubeletVersion (rule 5). Stricter than the
webhook, the ConfigMap must also exist, carry the label
nodeguard.dev/kubelet-config=true and validate, because the agent would
otherwise refuse to apply it. If any node is refused by these checks, no node
is written.

` + changeHelpCommon,
		Example: `  # See what would change, without writing
  kubectl nodeguard assign kubelet-configs/pool-blue -l nodeguard.dev/pool=blue --dry-run=client
  # Let the apiserver and the webhook judge it too, still without writing
  kubectl nodeguard assign kubelet-configs/pool-blue -l nodeguard.dev/pool=blue --dry-run=server
  # Assign
  kubectl nodeguard assign pool-blue -n kubelet-configs node-a node-b`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("give the ConfigMap to assign, then node names or -l")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.selection.names = args[1:]
			if err := o.validate(); err != nil {
				return err
			}
			ref, err := e.resolveConfigMap(args[0])
			if err != nil {
				return err
			}
			return runChange(cmd, e, o, &ref)
		},
	}
	addChangeFlags(cmd, o)
	return cmd
}

func newUnassignCommand(e *env) *cobra.Command {
	o := &changeOptions{}
	cmd := &cobra.Command{
		Use:   "unassign (NODE... | -l SELECTOR)",
		Short: "Return nodes to their local kubelet configuration",
		Long: `Remove the nodeguard.dev/config-source annotation of nodes, so that their
agents return them to the node's local kubelet configuration. On a node that
still carries a legacy spec.configSource the annotation is set to "" instead,
which means the local configuration too, where removing it would let the
legacy source apply. Clearing an assignment is never refused by nodeguard.

` + changeHelpCommon,
		Example: `  kubectl nodeguard unassign node-a
  kubectl nodeguard unassign -l nodeguard.dev/pool=blue --dry-run=server`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.selection.names = args
			if err := o.validate(); err != nil {
				return err
			}
			return runChange(cmd, e, o, nil)
		},
	}
	addChangeFlags(cmd, o)
	return cmd
}

// change is one node's part in an assign or unassign.
type change struct {
	node      string
	from, to  string
	unchanged bool
	// value is the annotation's new value; nil removes it.
	value   *string
	verdict verdict
	// sent is set once the patch went to the server, whose answer follows.
	sent           bool
	serverErr      error
	serverWarnings []string
}

// runChange assigns ref, or unassigns when ref is nil.
func runChange(cmd *cobra.Command, e *env, o *changeOptions, ref *contract.ConfigMapRef) error {
	ctx := cmd.Context()
	client, err := e.client()
	if err != nil {
		return err
	}
	nodes, err := o.selection.fetch(ctx, client)
	if err != nil {
		// Every named node must exist before anything is written.
		return err
	}
	if len(nodes) == 0 {
		return o.selection.noNodesError()
	}
	var changes []*change
	if ref != nil {
		cm, err := client.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cm = nil
		case err != nil:
			return fmt.Errorf("getting ConfigMap %s: %w", ref, err)
		}
		changes = planAssign(nodes, newCandidate(*ref, cm))
	} else {
		changes = planUnassign(nodes)
	}

	blocked := false
	switch o.dryRun {
	case dryRunNone:
		for _, c := range changes {
			blocked = blocked || c.verdict.refused()
		}
		if !blocked {
			sendChanges(cmd, client, changes, false)
		}
	case dryRunServer:
		sendChanges(cmd, client, changes, true)
	}
	verb := "assigned"
	if ref == nil {
		verb = "unassigned"
	}
	refused, failed := printChanges(e.streams.Out, changes, o.dryRun, verb, blocked)
	switch {
	case failed > 0:
		return fmt.Errorf("%d node(s) could not be changed (see above)", failed)
	case refused > 0:
		return fmt.Errorf("%d node(s) %w (see above)", refused, errRefused)
	}
	return nil
}

func planAssign(nodes []*corev1.Node, cand *candidate) []*change {
	target := cand.ref.String()
	changes := make([]*change, len(nodes))
	for i, node := range nodes {
		c := &change{node: node.Name, from: describeAssignment(node), to: target}
		if current, present := node.Annotations[contract.ConfigSourceAnnotation]; present && current == target {
			c.unchanged = true
		} else {
			c.value = &target
			c.verdict = cand.judge(node)
		}
		changes[i] = c
	}
	return changes
}

func planUnassign(nodes []*corev1.Node) []*change {
	changes := make([]*change, len(nodes))
	for i, node := range nodes {
		c := &change{node: node.Name, from: describeAssignment(node), to: cellLocal}
		_, assigned, err := contract.AssignmentOf(node)
		switch {
		case !assigned && err == nil:
			c.unchanged = true
		case node.Spec.ConfigSource != nil && node.Spec.ConfigSource.ConfigMap != nil:
			// An absent annotation would let the legacy source apply.
			local := ""
			c.value = &local
		}
		changes[i] = c
	}
	return changes
}

// describeAssignment renders a node's current assignment for FROM.
func describeAssignment(node *corev1.Node) string {
	a, ok, err := contract.AssignmentOf(node)
	switch {
	case err != nil:
		return fmt.Sprintf("<invalid %q>", node.Annotations[contract.ConfigSourceAnnotation])
	case !ok:
		return cellLocal
	case a.Legacy:
		return a.ConfigMap.String() + " (legacy spec.configSource)"
	}
	return a.ConfigMap.String()
}

// sendChanges patches every node that changes, one at a time so that the
// apiserver's warnings can be told apart per node. With dryRun the
// apiserver runs admission, the webhook included, and persists nothing; the
// client-side refusals are sent too, so the webhook's own word is shown
// beside them.
func sendChanges(cmd *cobra.Command, client kubernetes.Interface, changes []*change, dryRun bool) {
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, c := range changes {
		if c.unchanged {
			continue
		}
		patch, err := annotationPatch(c.value)
		c.sent = true
		if err != nil {
			c.serverErr = err
			continue
		}
		ctx, sink := withWarningSink(cmd.Context())
		_, c.serverErr = client.CoreV1().Nodes().Patch(ctx, c.node, types.MergePatchType, patch, opts)
		c.serverWarnings = sink.list()
	}
}

// annotationPatch is a JSON merge patch that sets the assignment annotation
// to value, or removes it when value is nil.
func annotationPatch(value *string) ([]byte, error) {
	var v any
	if value != nil {
		v = *value
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.ConfigSourceAnnotation: v}}})
	if err != nil {
		return nil, fmt.Errorf("building the patch: %w", err)
	}
	return patch, nil
}

// isRefusal tells a "no" from the server (admission or authorization) from
// a failure to get an answer.
func isRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsUnauthorized(err)
}

// printChanges prints one line per node, then the reasons indented below
// it, then a summary; it returns how many nodes were refused and how many
// failed for another reason.
func printChanges(w io.Writer, changes []*change, dryRun, verb string, blocked bool) (refused, failed int) {
	counts := map[string]int{}
	var order []string
	for _, c := range changes {
		word, isRefused, isFailed := c.outcome(dryRun, verb, blocked)
		if isRefused {
			refused++
		}
		if isFailed {
			failed++
		}
		if counts[word] == 0 {
			order = append(order, word)
		}
		counts[word]++
		if c.unchanged {
			fmt.Fprintf(w, "node/%s: %s: %s\n", c.node, c.from, word)
		} else {
			fmt.Fprintf(w, "node/%s: %s -> %s: %s\n", c.node, c.from, c.to, word)
		}
		for _, p := range c.verdict.problems {
			fmt.Fprintf(w, "    client check: %s\n", p)
		}
		for _, warning := range c.verdict.warnings {
			fmt.Fprintf(w, "    client warning: %s\n", warning)
		}
		if c.sent {
			server := "server"
			if dryRun == dryRunServer {
				server = "server (dry run)"
			}
			if c.serverErr != nil {
				fmt.Fprintf(w, "    %s: %v\n", server, c.serverErr)
			} else if c.verdict.refused() {
				fmt.Fprintf(w, "    %s: accepted\n", server)
			}
			for _, warning := range c.serverWarnings {
				fmt.Fprintf(w, "    server warning: %s\n", warning)
			}
		}
	}
	parts := make([]string, len(order))
	for i, word := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[word], word)
	}
	summary := fmt.Sprintf("%d node(s): %s", len(changes), strings.Join(parts, ", "))
	switch {
	case dryRun == dryRunClient:
		summary += "; dry run (client): nothing was sent"
	case dryRun == dryRunServer:
		summary += "; dry run (server): nothing was written"
	case blocked:
		summary += "; nothing was written because the client-side checks refused a node"
	}
	fmt.Fprintln(w, summary)
	return refused, failed
}

// outcome is the word for what came of a change, and whether it counts as
// refused or failed.
func (c *change) outcome(dryRun, verb string, blocked bool) (word string, refused, failed bool) {
	switch {
	case c.unchanged:
		return "unchanged", false, false
	case c.sent && c.serverErr != nil && isRefusal(c.serverErr):
		if dryRun == dryRunServer {
			return "refused by the server (dry run)", true, false
		}
		return "refused by the server", true, false
	case c.sent && c.serverErr != nil && !c.verdict.refused():
		return "failed", false, true
	case c.verdict.refused():
		return "refused", true, false
	case dryRun == dryRunClient:
		return "would be " + verb, false, false
	case dryRun == dryRunServer:
		return "accepted by the server (dry run)", false, false
	case blocked:
		return "not written", false, false
	}
	return verb, false, false
}
