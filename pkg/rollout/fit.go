package rollout

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/disruption"
	"github.com/nodeguard/nodeguard/pkg/podfit"
)

// WouldNotFit says why a Node running cfg (the target's configuration,
// decoded) could no longer hold its pods, whose requests are given (the
// pods bound to it that are not over), or "" when they fit: its
// allocatable as cfg's reservations and pod limit leave its reported
// capacity (disruption.Allocatable) against what they request, as the
// scheduler fits pods (pkg/podfit). The capacity is the Node's word about
// itself, and decides for that Node alone: it is what Input.Unfit
// reports, never a reason to hold the others back.
func WouldNotFit(cfg *kubeletconfigv1beta1.KubeletConfiguration, node *corev1.Node, pods []corev1.ResourceList) (string, error) {
	if len(node.Status.Capacity) == 0 {
		return "", nil
	}
	allocatable, err := disruption.Allocatable(cfg, node.Status.Capacity)
	if err != nil {
		return "", err
	}
	short := podfit.Check(pods, allocatable)
	if len(short) == 0 {
		return "", nil
	}
	return fmt.Sprintf("its %d pods would not fit what the target leaves of its capacity: %s", len(pods), podfit.Describe(short)), nil
}

// unfit lists, for the status, the Nodes not yet assigned the target that
// Input.Unfit says it would leave unable to hold their pods.
func (d *decider) unfit() []v1alpha1.UnfitNode {
	var out []v1alpha1.UnfitNode
	for _, name := range slices.Sorted(maps.Keys(d.in.Unfit)) {
		why := d.in.Unfit[name]
		m, ok := d.pool.members[name]
		if !ok || why == "" {
			continue
		}
		switch d.stateOf(m) {
		case StatePending, StateUnavailable, StateUntouched:
			out = append(out, v1alpha1.UnfitNode{Name: name, Message: Truncate(why, maxSkipMessage)})
		}
	}
	return out
}

// unfitNote names them in the Progressing condition's message.
func (d *decider) unfitNote() string {
	unfit := d.unfit()
	if len(unfit) == 0 {
		return ""
	}
	var list []string
	for _, u := range unfit {
		list = append(list, u.Name+" ("+u.Message+")")
	}
	allowed := ""
	if d.spec.trial != nil && d.spec.trial.AllowShrink {
		allowed = " (spec.trial.allowShrink: their trials will not fail for it)"
	}
	return fmt.Sprintf("; %d Nodes the target would leave unable to hold their pods%s: %s", len(unfit), allowed, names(list))
}
