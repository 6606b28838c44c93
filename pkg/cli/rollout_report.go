package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// The apiVersion and kind of `rollout status -o json|yaml`, a document
// format of this plugin like StatusListKind.
const (
	RolloutStatusAPIVersion = StatusListAPIVersion
	RolloutStatusKind       = "RolloutStatus"
)

// RolloutStatus is what `rollout status` shows: the rollout as the
// controller last wrote it, and each selected Node as judged now. Its JSON
// names are part of the plugin's output contract.
type RolloutStatus struct {
	Rollout    string `json:"rollout"`
	Generation int64  `json:"generation"`
	// Spec and Status are the rollout's, as read.
	Spec   v1alpha1.KubeletConfigRolloutSpec   `json:"spec"`
	Status v1alpha1.KubeletConfigRolloutStatus `json:"status"`
	// Target is the version of spec.configMapRef the Nodes are judged
	// against: the ConfigMap as read now, or status.target when it could
	// not be read; nil when it does not exist.
	Target *contract.ConfigMapVersion `json:"target"`
	// Nodes are the selected Nodes, by name.
	Nodes []RolloutNode `json:"nodes"`
	// NodesError says why the Nodes could not be judged, or what could
	// not be read on some of them.
	NodesError string `json:"nodesError,omitempty"`
}

// RolloutNode is one selected Node.
type RolloutNode struct {
	Node string `json:"node"`
	// State, Unavailable and Detail are pkg/rollout's verdict, the one the
	// controller makes.
	State       rollout.NodeState `json:"state"`
	Unavailable bool              `json:"unavailable"`
	Detail      string            `json:"detail,omitempty"`
	// Ready is the status of the Node's Ready condition, "" when absent.
	Ready corev1.ConditionStatus `json:"ready"`
	// Rollout, PreviousConfigSource and Drain are the rollout bookkeeping
	// on the Node (nodeguard.dev/rollout,
	// nodeguard.dev/previous-config-source, nodeguard.dev/drain: empty when
	// absent, the agent's own default).
	Rollout              string  `json:"rollout,omitempty"`
	PreviousConfigSource *string `json:"previousConfigSource,omitempty"`
	Drain                string  `json:"drain,omitempty"`
	// Config is the Node as `kubectl nodeguard status` shows it.
	Config NodeConfigStatus `json:"config"`
}

// rolloutStatus reads the rollout, its Nodes and its target, and judges
// the Nodes with pkg/rollout: the Nodes selected as ObserveSelected picks
// them, each observed by ObserveNode, and the verdicts Decide gives.
// Decide's other outputs (what to assign or revert, the status) are
// dropped: the plugin shows what the controller would do and does none
// of it.
func (e *env) rolloutStatus(ctx context.Context, kube kubernetes.Interface, rollouts nodeguardclient.KubeletConfigRolloutInterface, name string) (*RolloutStatus, error) {
	r, err := getRollout(ctx, rollouts, name)
	if err != nil {
		return nil, err
	}
	out := &RolloutStatus{Rollout: r.Name, Generation: r.Generation, Spec: r.Spec, Status: r.Status, Nodes: []RolloutNode{}}
	selector, err := rollout.Selector(r)
	if err != nil {
		out.NodesError = err.Error()
		return out, nil
	}
	all, err := listRollouts(ctx, rollouts)
	if err != nil {
		return nil, err
	}
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the Nodes of rollout %s: %w", name, err)
	}
	byName := map[string]*corev1.Node{}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
		byName[nodes[i].Name] = nodes[i]
	}
	observed, readErr := rollout.ObserveSelected(selector, r.Name, all, nodes)
	if readErr != nil {
		out.NodesError = readErr.Error()
	}
	var ineligible bool
	if out.Target, ineligible, err = e.rolloutTarget(ctx, kube, r); err != nil {
		return nil, err
	}
	decision, err := rollout.Decide(rollout.Input{Rollout: r, Target: out.Target, TargetIneligible: ineligible, Nodes: observed,
		Now: metav1.NewTime(e.now())})
	if err != nil {
		out.NodesError = err.Error()
		return out, nil
	}
	for _, verdict := range decision.Nodes {
		node := byName[verdict.Name]
		row := RolloutNode{
			Node: verdict.Name, State: verdict.State, Unavailable: verdict.Unavailable, Detail: verdict.Detail,
			Rollout: node.Annotations[contract.RolloutAnnotation], Drain: node.Annotations[contract.DrainAnnotation], Config: statusOf(node),
		}
		if prev, ok := node.Annotations[contract.PreviousConfigSourceAnnotation]; ok {
			row.PreviousConfigSource = &prev
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				row.Ready = c.Status
			}
		}
		out.Nodes = append(out.Nodes, row)
	}
	return out, nil
}

// rolloutTarget is the version of the ConfigMap the rollout names, as the
// controller reads it (rollout.TargetOf): nil when it does not exist or is
// not eligible, which ineligible tells apart. A user who may not read
// it gets status.target instead, which is the controller's last reading,
// with a warning, rather than no verdicts at all.
func (e *env) rolloutTarget(ctx context.Context, kube kubernetes.Interface, r *v1alpha1.KubeletConfigRollout) (target *contract.ConfigMapVersion, ineligible bool, err error) {
	ref := r.Spec.ConfigMapRef
	cm, err := kube.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		target, ineligible = rollout.TargetOf(cm)
		return target, ineligible, nil
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case apierrors.IsForbidden(err):
		t := r.Status.Target
		if t == nil || t.Namespace != ref.Namespace || t.Name != ref.Name || t.UID == "" {
			t = nil
		}
		fmt.Fprintf(e.streams.ErrOut, "Warning: cannot read ConfigMap %s/%s (%v); judging the Nodes against status.target\n", ref.Namespace, ref.Name, err)
		return t, false, nil
	}
	return nil, false, fmt.Errorf("getting ConfigMap %s/%s, the rollout's target: %w", ref.Namespace, ref.Name, err)
}
