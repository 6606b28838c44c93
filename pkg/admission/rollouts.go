package admission

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// admitRollout is the rollout selector rule, for everyone who creates a
// KubeletConfigRollout or changes its selector, administrators included:
// it guards against a slip, not an attacker. A rollout assigns its
// configuration to every Node its selector picks, so a selector a node can
// satisfy with labels it writes itself lets any node join the pool and be
// assigned its configuration: self-assignment by another name, with
// allowNodeSelfAssignment off. The selector must therefore hold at least one
// requirement no node can satisfy on its own: a matchLabels entry, or a
// matchExpressions In or Exists, on a label contract.NodeMayWriteLabel
// refuses to nodes (node-restriction). NotIn and DoesNotExist do not count: a node
// satisfies them by not carrying the label, and joins through the other
// keys. An update that leaves the selector as it is is not judged, so an
// existing rollout can always be paused or retargeted, whatever it selects.
func admitRollout(req *Request) Result {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow()
	}
	rollout, _ := req.Obj.(*v1alpha1.KubeletConfigRollout)
	if rollout == nil {
		return refuse(RuleMalformed, "%s of a KubeletConfigRollout without the object", req.Operation)
	}
	if req.Operation == admissionv1.Update {
		old, _ := req.OldObj.(*v1alpha1.KubeletConfigRollout)
		if old == nil {
			return refuse(RuleMalformed, "UPDATE of a KubeletConfigRollout without the old object")
		}
		if apiequality.Semantic.DeepEqual(rollout.Spec.NodeSelector, old.Spec.NodeSelector) {
			return allow()
		}
	}
	selector := &rollout.Spec.NodeSelector
	if _, err := metav1.LabelSelectorAsSelector(selector); err != nil {
		return refuse(RuleRolloutSelector, "KubeletConfigRollout %q: spec.nodeSelector is not a valid label selector: %v", rollout.Name, err)
	}
	writable, negated := sets.New[string](), sets.New[string]()
	for key := range selector.MatchLabels {
		if !contract.NodeMayWriteLabel(key) {
			return allow()
		}
		writable.Insert(key)
	}
	for _, r := range selector.MatchExpressions {
		switch {
		case contract.NodeMayWriteLabel(r.Key):
			writable.Insert(r.Key)
		case r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpExists:
			return allow()
		default:
			negated.Insert(r.Key)
		}
	}
	var why []string
	if writable.Len() > 0 {
		why = append(why, fmt.Sprintf("nodes may write %s themselves", quoteKeys(writable)))
	}
	if negated.Len() > 0 {
		why = append(why, fmt.Sprintf("%s appear only under NotIn or DoesNotExist, which a node satisfies by not carrying them", quoteKeys(negated)))
	}
	if len(why) == 0 {
		why = append(why, "it requires no label at all")
	}
	return refuse(RuleRolloutSelector, "KubeletConfigRollout %q: spec.nodeSelector must require, with matchLabels or an In or Exists expression, a label no node can set on itself "+
		"(under %s), or any node could label itself into the rollout and be assigned its configuration; %s. "+
		"Select on %s, which only an administrator sets (kubectl label node NAME %s=blue)",
		rollout.Name, contract.NodeReservedLabels, strings.Join(why, "; "), contract.PoolLabel, contract.PoolLabel)
}

// quoteKeys lists label keys in order, quoted.
func quoteKeys(keys sets.Set[string]) string {
	list := sets.List(keys)
	for i, k := range list {
		list[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(list, ", ")
}
