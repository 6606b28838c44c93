package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// authenticatedGroup is added to the node's identity in the review because
// every authenticated request carries it, a kubelet's included.
const authenticatedGroup = "system:authenticated"

func newExplainCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "explain NODE CONFIGMAP",
		Short: "Explain why a node may or may not read a ConfigMap",
		Long: `Explain whether NODE may read CONFIGMAP (NAMESPACE/NAME, or NAME in the
namespace of -n or of the kubeconfig context), two ways:

Graph path, computed here from the API, the way nodeguard's authorizer builds
its graph: a path exists when the node is assigned the ConfigMap (annotation
nodeguard.dev/config-source, or a legacy spec.configSource) and the ConfigMap
carries the label nodeguard.dev/kubelet-config=true, or when a pod bound to
the node (spec.nodeName) references it in a volume, a projected volume, or
env/envFrom of any container. What is missing is named: not assigned,
assigned but not eligible, no pod uses it.

Authorizer: a SubjectAccessReview asks the apiserver whether user
system:node:NODE in groups system:nodes and system:authenticated may get the
ConfigMap. The apiserver consults its whole authorization chain, nodeguard's
/authorize first; the decision and the reason it returns are printed as they
come. The apiserver caches nodeguard's Allow answers (authorizedTTL 10s as shipped;
refusals are not cached), so a revocation may take that long to show here.

Needs permission to get the Node and the ConfigMap, list pods in the
ConfigMap's namespace and create subjectaccessreviews.`,
		Example: `  kubectl nodeguard explain node-a kubelet-configs/pool-blue
  kubectl nodeguard explain node-a app-settings -n shop`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want NODE and CONFIGMAP, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := (nodeSelection{names: args[:1]}).validate(false); err != nil {
				return err
			}
			ref, err := e.resolveConfigMap(args[1])
			if err != nil {
				return err
			}
			client, err := e.client()
			if err != nil {
				return err
			}
			x, err := explain(cmd.Context(), client, args[0], ref)
			if err != nil {
				return err
			}
			x.print(e.streams.Out)
			return nil
		},
	}
}

// explanation is what explain found.
type explanation struct {
	node string
	ref  contract.ConfigMapRef

	nodeFound bool
	// assignment is the node's assignment, nil for none; assignmentErr says
	// why the annotation does not parse.
	assignment    *contract.Assignment
	assignmentErr error
	// configMap is nil when the ConfigMap does not exist.
	configMap *corev1.ConfigMap
	// podsBound counts the pods bound to the node in the ConfigMap's
	// namespace; uses lists those that reference it.
	podsBound int
	uses      []podUses

	review authorizationv1.SubjectAccessReview
}

type podUses struct {
	pod  string
	uses []string
}

func explain(ctx context.Context, client kubernetes.Interface, nodeName string, ref contract.ConfigMapRef) (*explanation, error) {
	x := &explanation{node: nodeName, ref: ref}
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("getting node %q: %w", nodeName, err)
	default:
		x.nodeFound = true
		a, ok, err := contract.AssignmentOf(node)
		x.assignmentErr = err
		if ok {
			x.assignment = &a
		}
	}
	cm, err := client.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("getting ConfigMap %s: %w", ref, err)
	default:
		x.configMap = cm
	}
	// A pod references ConfigMaps of its own namespace only.
	pods, err := client.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods bound to node %q in namespace %s: %w", nodeName, ref.Namespace, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		// The field selector already did this; it costs nothing to be sure.
		if pod.Spec.NodeName != nodeName {
			continue
		}
		x.podsBound++
		if uses := configMapUses(pod, ref.Name); len(uses) > 0 {
			x.uses = append(x.uses, podUses{pod: pod.Namespace + "/" + pod.Name, uses: uses})
		}
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   contract.NodeUserPrefix + nodeName,
		Groups: []string{contract.NodesGroup, authenticatedGroup},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ref.Namespace, Verb: "get", Version: "v1", Resource: "configmaps", Name: ref.Name,
		},
	}}
	answered, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("asking the authorizer (SubjectAccessReview): %w", err)
	}
	x.review = *answered
	// What was asked is printed as asked, whatever the answer echoes.
	x.review.Spec = review.Spec
	return x, nil
}

func (x *explanation) eligible() bool {
	return x.configMap != nil && contract.IsEligible(x.configMap.Labels)
}

func (x *explanation) assignedThis() bool {
	return x.assignment != nil && x.assignment.ConfigMap == x.ref
}

// assignmentPath is the first kind of path: an assignment of an eligible
// ConfigMap.
func (x *explanation) assignmentPath() bool { return x.assignedThis() && x.eligible() }

func (x *explanation) hasPath() bool { return x.assignmentPath() || len(x.uses) > 0 }

func (x *explanation) configMapLine() string {
	switch {
	case x.configMap == nil:
		return "does not exist"
	case x.eligible():
		return fmt.Sprintf("exists, eligible (label %s=%s)", contract.EligibleLabel, contract.EligibleLabelValue)
	}
	return fmt.Sprintf("exists, not eligible (no label %s=%s): an assignment gives no path to it, only a pod can",
		contract.EligibleLabel, contract.EligibleLabelValue)
}

func (x *explanation) assignmentLine() string {
	switch {
	case !x.nodeFound:
		return fmt.Sprintf("node %s does not exist", x.node)
	case x.assignmentErr != nil:
		return fmt.Sprintf("the %s annotation is invalid and assigns nothing: %v", contract.ConfigSourceAnnotation, x.assignmentErr)
	case x.assignment == nil:
		return fmt.Sprintf("%s is not assigned anything (local configuration)", x.node)
	case !x.assignedThis():
		return fmt.Sprintf("%s is assigned %s, not this ConfigMap", x.node, x.assignment.ConfigMap)
	}
	source := "annotation " + contract.ConfigSourceAnnotation
	if x.assignment.Legacy {
		source = "legacy spec.configSource"
	}
	switch {
	case x.configMap == nil:
		return fmt.Sprintf("%s is assigned it (%s), but the ConfigMap does not exist: no path", x.node, source)
	case !x.eligible():
		return fmt.Sprintf("%s is assigned it (%s), but the ConfigMap is not eligible: no path", x.node, source)
	}
	return fmt.Sprintf("%s is assigned it (%s) and it is eligible: a path", x.node, source)
}

func (x *explanation) pathLine() string {
	var through []string
	if x.assignmentPath() {
		through = append(through, "the assignment")
	}
	if len(x.uses) > 0 {
		pods := make([]string, len(x.uses))
		for i, u := range x.uses {
			pods[i] = u.pod
		}
		through = append(through, "pod "+strings.Join(pods, ", pod "))
	}
	if len(through) > 0 {
		return "yes, through " + strings.Join(through, " and ")
	}
	var missing []string
	switch {
	case !x.assignedThis():
		missing = append(missing, "not assigned")
	case x.configMap == nil:
		missing = append(missing, "assigned but the ConfigMap does not exist")
	default:
		missing = append(missing, "assigned but not eligible")
	}
	missing = append(missing, "no pod bound to the node uses it")
	return "none: " + strings.Join(missing, "; ")
}

func (x *explanation) decision() string {
	switch st := x.review.Status; {
	case st.Allowed:
		return "allowed"
	case st.Denied:
		return "denied"
	}
	return "not allowed (no authorizer allowed it)"
}

// note points at the likely cause when the two answers disagree.
func (x *explanation) note() string {
	allowed := x.review.Status.Allowed
	switch {
	case x.hasPath() && !allowed:
		return "the graph path exists but the authorizer did not allow: nodeguard may not have seen the change yet, or the node's kubelet may be below nodeguard's minimum version (see the reason)"
	case !x.hasPath() && allowed:
		return "allowed without a graph path: another authorizer in the chain (Node, RBAC) allowed it, or the apiserver still caches an earlier allow of nodeguard's (authorizedTTL; see the reason)"
	}
	return ""
}

func (x *explanation) print(w io.Writer) {
	fmt.Fprintf(w, "Node %s and ConfigMap %s\n\n", x.node, x.ref)
	fmt.Fprintln(w, "Graph path, computed from the API:")
	fmt.Fprintf(w, "  configmap:   %s\n", x.configMapLine())
	fmt.Fprintf(w, "  assignment:  %s\n", x.assignmentLine())
	switch {
	case x.podsBound == 0:
		fmt.Fprintf(w, "  pods:        no pod is bound to %s in namespace %s\n", x.node, x.ref.Namespace)
	case len(x.uses) == 0:
		fmt.Fprintf(w, "  pods:        none of the %d pod(s) bound to %s in namespace %s uses it\n", x.podsBound, x.node, x.ref.Namespace)
	}
	for _, u := range x.uses {
		fmt.Fprintf(w, "  pods:        pod %s uses it: %s\n", u.pod, strings.Join(u.uses, ", "))
	}
	fmt.Fprintf(w, "  path:        %s\n\n", x.pathLine())

	spec := x.review.Spec
	fmt.Fprintf(w, "Authorizer (SubjectAccessReview: user %s, groups %s; get configmaps %s):\n",
		spec.User, strings.Join(spec.Groups, ", "), x.ref)
	fmt.Fprintf(w, "  decision:    %s\n", x.decision())
	reason := x.review.Status.Reason
	if reason == "" {
		reason = "(none given)"
	}
	fmt.Fprintf(w, "  reason:      %s\n", strings.ReplaceAll(reason, "\n", "; "))
	if e := x.review.Status.EvaluationError; e != "" {
		fmt.Fprintf(w, "  error:       %s\n", e)
	}
	if n := x.note(); n != "" {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}
