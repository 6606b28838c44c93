package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// The apiVersion and kind of `status -o json|yaml`. They name a document
// format of this plugin, not an API served anywhere.
const (
	StatusListAPIVersion = "cli.nodeguard.dev/v1alpha1"
	StatusListKind       = "NodeConfigStatusList"
)

// maxErrorWidth and maxPendingWidth keep the default table readable; -o
// wide shows the whole error and every pending pod.
const (
	maxErrorWidth   = 72
	maxPendingWidth = 40
)

// Cell values for what is not there. "local" is the contract's null REF: the
// node's own configuration.
const (
	cellNone    = "<none>"
	cellUnknown = "<unknown>"
	cellLocal   = "local"
)

type statusOptions struct {
	selection nodeSelection
	output    string
	noHeaders bool
}

func newStatusCommand(e *env) *cobra.Command {
	o := &statusOptions{}
	jsonYAML := genericclioptions.NewJSONYamlPrintFlags()
	formats := append([]string{"wide"}, jsonYAML.AllowedFormats()...)
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show each node's assigned, active and last-known-good kubelet configuration",
		Long: `Show, for each node (all nodes when none is named), what it is assigned and
what its agent last reported:

  NODE             the node
  KUBELET          status.nodeInfo.kubeletVersion
  ASSIGNED         the nodeguard.dev/config-source annotation (or legacy
                   spec.configSource) as NAMESPACE/NAME; "@RV" is added once the
                   agent has seen it, " (pending)" while the agent still reports
                   an older assignment; "local" when nothing is assigned
  ACTIVE           the configuration the kubelet runs (NAMESPACE/NAME@RV, or local)
  LAST-KNOWN-GOOD  the one rolled back to when a new one fails its trial
  RUNNING          how the kubelet's running configuration (its /configz)
                   compares with the one its agent applied: Matches, Differs
                   with the fields the kubelet runs otherwise (the ERROR says
                   the values and what set them), or Unknown when it cannot be
                   read; <none> for the local configuration
  PHASE            where a change under way stands: Draining, Restarting or
                   TrialInProgress (the agent's status.phase); <none> between
                   changes
  PENDING-PODS     the pods (NAMESPACE/NAME) a drain waits on, or, after a drain
                   that timed out, the pods that blocked it; shortened, -o wide
                   shows them all
  TRIAL            time left in the trial of the active configuration, when the
                   KubeletConfigReady condition says one is running
  ERROR            the agent's error, shortened; -o wide shows all of it

"<unknown>" means the agent has not reported yet (no nodeguard.dev/config-status
annotation). -o wide adds the KubeletConfigReady status and reason, and the
UIDs of the ConfigMaps. -o json|yaml prints a ` + StatusListKind + `
(apiVersion ` + StatusListAPIVersion + `) whose items hold the assignment, the
agent's status annotation as written, the condition and the trial.`,
		Example: `  kubectl nodeguard status
  kubectl nodeguard status -l node-role.kubernetes.io/worker -o wide
  kubectl nodeguard status node-a -o yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.selection.names = args
			if err := o.selection.validate(true); err != nil {
				return err
			}
			var printer printers.ResourcePrinter
			switch o.output {
			case "", "wide":
			default:
				p, err := jsonYAML.ToPrinter(o.output)
				if err != nil {
					return usagef("unsupported output format %q: use one of %s", o.output, strings.Join(formats, ", "))
				}
				printer = p
			}
			return runStatus(cmd, e, o, printer)
		},
	}
	cmd.Flags().StringVarP(&o.selection.selector, "selector", "l", "", "Label selector of the nodes to show (e.g. -l nodeguard.dev/pool=blue); not with node names")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: one of "+strings.Join(formats, ", ")+"; a table when empty")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "Print the table without its header line")
	return cmd
}

func runStatus(cmd *cobra.Command, e *env, o *statusOptions, printer printers.ResourcePrinter) error {
	client, err := e.client()
	if err != nil {
		return err
	}
	nodes, fetchErr := o.selection.fetch(cmd.Context(), client)
	var missing errNodesMissing
	if fetchErr != nil && !errors.As(fetchErr, &missing) {
		return fetchErr
	}
	statuses := make([]NodeConfigStatus, len(nodes))
	for i, node := range nodes {
		statuses[i] = statusOf(node)
	}
	if printer != nil {
		list, err := statusList(statuses)
		if err != nil {
			return err
		}
		if err := printer.PrintObj(list, e.streams.Out); err != nil {
			return fmt.Errorf("printing: %w", err)
		}
	} else {
		if len(statuses) == 0 && fetchErr == nil {
			fmt.Fprintln(e.streams.ErrOut, "No nodes found.")
			return nil
		}
		table := statusTable(statuses, e.now())
		if o.output != "wide" {
			shortenCells(table)
		}
		tp := printers.NewTablePrinter(printers.PrintOptions{Wide: o.output == "wide", NoHeaders: o.noHeaders})
		if err := tp.PrintObj(table, e.streams.Out); err != nil {
			return fmt.Errorf("printing: %w", err)
		}
	}
	return fetchErr
}

// statusList is the document -o json|yaml prints.
func statusList(statuses []NodeConfigStatus) (runtime.Object, error) {
	items := make([]any, len(statuses))
	for i := range statuses {
		item, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&statuses[i])
		if err != nil {
			return nil, fmt.Errorf("converting the status of node %s: %w", statuses[i].Node, err)
		}
		items[i] = item
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": StatusListAPIVersion,
		"kind":       StatusListKind,
		"items":      items,
	}}, nil
}

// Wide columns have priority 1, which the table printer shows only with
// -o wide.
var statusColumns = []metav1.TableColumnDefinition{
	{Name: "Node", Type: "string"},
	{Name: "Kubelet", Type: "string"},
	{Name: "Assigned", Type: "string"},
	{Name: "Active", Type: "string"},
	{Name: "Last-Known-Good", Type: "string"},
	{Name: "Running", Type: "string"},
	{Name: "Phase", Type: "string"},
	{Name: "Pending-Pods", Type: "string"},
	{Name: "Trial", Type: "string"},
	{Name: "Ready", Type: "string", Priority: 1},
	{Name: "Reason", Type: "string", Priority: 1},
	{Name: "Assigned-UID", Type: "string", Priority: 1},
	{Name: "Active-UID", Type: "string", Priority: 1},
	{Name: "Last-Known-Good-UID", Type: "string", Priority: 1},
	{Name: "Error", Type: "string"},
}

// shortened are the cells cut outside wide output, by column index; the
// full text is carried in the row and cut at print time.
var shortened = map[int]func(string) string{
	columnIndex("Error"):        func(s string) string { return shorten(s, maxErrorWidth) },
	columnIndex("Pending-Pods"): func(s string) string { return shortenList(s, maxPendingWidth) },
	columnIndex("Running"):      func(s string) string { return shortenList(s, maxPendingWidth) },
}

func columnIndex(name string) int {
	return slices.IndexFunc(statusColumns, func(c metav1.TableColumnDefinition) bool { return c.Name == name })
}

// statusTable builds the table with every cell in full.
func statusTable(statuses []NodeConfigStatus, now time.Time) *metav1.Table {
	table := &metav1.Table{ColumnDefinitions: statusColumns}
	for i := range statuses {
		s := &statuses[i]
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{
			s.Node,
			orUnknown(s.KubeletVersion),
			assignedCell(s),
			reportedCell(s, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.Active }),
			reportedCell(s, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.LastKnownGood }),
			runningCell(s),
			phaseCell(s),
			pendingCell(s),
			trialCell(s, now),
			readyCell(s),
			reasonCell(s),
			uidCell(s, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.Assigned }),
			uidCell(s, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.Active }),
			uidCell(s, func(r *contract.ConfigStatus) *contract.ConfigMapVersion { return r.LastKnownGood }),
			errorCell(s),
		}})
	}
	return table
}

// shortenCells cuts the ERROR and PENDING-PODS cells for the narrow table.
func shortenCells(table *metav1.Table) {
	for i := range table.Rows {
		for column, cut := range shortened {
			if s, ok := table.Rows[i].Cells[column].(string); ok {
				table.Rows[i].Cells[column] = cut(s)
			}
		}
	}
}

func shorten(s string, width int) string {
	runes := []rune(s)
	if len(runes) <= width {
		return s
	}
	return string(runes[:width-3]) + "..."
}

// shortenList cuts a comma-separated list to the items that fit in width
// with a count of the rest ("a,b,+3 more"), so that no name is cut in two;
// the first item is always shown, shortened if it must be.
func shortenList(s string, width int) string {
	if len([]rune(s)) <= width {
		return s
	}
	items := strings.Split(s, ",")
	kept := shorten(items[0], width)
	for i := 1; i < len(items); i++ {
		more := fmt.Sprintf(",+%d more", len(items)-i)
		if len([]rune(kept+","+items[i]+more)) > width {
			return kept + more
		}
		kept += "," + items[i]
	}
	return kept
}

func orUnknown(s string) string {
	if s == "" {
		return cellUnknown
	}
	return s
}

// shortRef renders a pinned ConfigMap version as NAMESPACE/NAME@RV.
func shortRef(ref *contract.ConfigMapVersion) string {
	if ref == nil {
		return cellLocal
	}
	s := ref.Namespace + "/" + ref.Name
	if ref.ResourceVersion != "" {
		s += "@" + ref.ResourceVersion
	}
	return s
}

// assignedCell shows the assignment the node is told to run, pinned to the
// version the agent saw when the agent has caught up with it.
func assignedCell(s *NodeConfigStatus) string {
	if s.AssignmentError != "" {
		return "<invalid>"
	}
	a := s.Assignment
	var seen *contract.ConfigMapVersion
	if s.Reported != nil {
		seen = s.Reported.Assigned
	}
	var cell string
	switch {
	case a == nil:
		cell = cellLocal
	case seen != nil && seen.Namespace == a.Namespace && seen.Name == a.Name:
		cell = shortRef(seen)
	default:
		cell = a.Namespace + "/" + a.Name
	}
	if a != nil && a.Legacy {
		cell += " (legacy)"
	}
	caughtUp := (a == nil && seen == nil) || (a != nil && seen != nil && seen.Namespace == a.Namespace && seen.Name == a.Name)
	if s.Reported != nil && !caughtUp {
		cell += " (pending)"
	}
	return cell
}

func reportedCell(s *NodeConfigStatus, pick func(*contract.ConfigStatus) *contract.ConfigMapVersion) string {
	if s.Reported == nil {
		return cellUnknown
	}
	return shortRef(pick(s.Reported))
}

func uidCell(s *NodeConfigStatus, pick func(*contract.ConfigStatus) *contract.ConfigMapVersion) string {
	if s.Reported == nil {
		return cellUnknown
	}
	ref := pick(s.Reported)
	if ref == nil {
		return cellLocal
	}
	return orUnknown(ref.UID)
}

// runningCell is how the kubelet's running configuration compares with the
// one its agent applied: Matches, Differs with the fields that differ, or
// Unknown (it could not be read); <none> when there is nothing to compare
// (the local configuration) or nothing read yet.
func runningCell(s *NodeConfigStatus) string {
	switch {
	case s.Reported == nil:
		return cellUnknown
	case s.Reported.Running == nil:
		return cellNone
	case s.Reported.Running.State != contract.RunningDiffers:
		return s.Reported.Running.State
	}
	fields := make([]string, len(s.Reported.Running.Differences))
	for i, d := range s.Reported.Running.Differences {
		fields[i] = d.Field
	}
	return contract.RunningDiffers + ": " + strings.Join(fields, ",")
}

// phaseCell is where a change under way stands, as the agent reports.
func phaseCell(s *NodeConfigStatus) string {
	switch {
	case s.Reported == nil:
		return cellUnknown
	case s.Reported.Phase == "":
		return cellNone
	}
	return s.Reported.Phase
}

// pendingCell lists the pods a drain waits on, or that blocked one.
func pendingCell(s *NodeConfigStatus) string {
	if s.Reported == nil || len(s.Reported.PendingPods) == 0 {
		return cellNone
	}
	return strings.Join(s.Reported.PendingPods, ",")
}

func trialCell(s *NodeConfigStatus, now time.Time) string {
	if s.Trial == nil {
		return cellNone
	}
	left, known := s.Trial.remaining(now)
	switch {
	case !known:
		return "running"
	case left == 0:
		return "ending"
	default:
		return duration.HumanDuration(left) + " left"
	}
}

func readyCell(s *NodeConfigStatus) string {
	if s.Condition == nil {
		return cellUnknown
	}
	return string(s.Condition.Status)
}

func reasonCell(s *NodeConfigStatus) string {
	if s.Condition == nil || s.Condition.Reason == "" {
		return cellNone
	}
	return s.Condition.Reason
}

// errorCell shows what went wrong, the agent's word first.
func errorCell(s *NodeConfigStatus) string {
	switch {
	case s.ReportedError != "":
		return s.ReportedError
	case s.Reported != nil && s.Reported.Error != "":
		return s.Reported.Error
	case s.AssignmentError != "":
		return fmt.Sprintf("the %s annotation is invalid: %s", contract.ConfigSourceAnnotation, s.AssignmentError)
	}
	return cellNone
}
