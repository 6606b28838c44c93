package noderestrictiondiff

import (
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is a write of a Node: a registration, an update (of nodes or
// nodes/status) or a delete, of its own Node or another's, changing what
// NodeRestriction's Node rule reads (labels in and out of the kubelet's
// set, taints, ownerReferences, the legacy configSource) and what
// nodeguard's contract adds (nodeguard.dev labels, the assignment
// annotation, a rollout's bookkeeping).
func (g *generator) node() *nodeWrite {
	name := pick(g, ownNode, ownNode, ownNode, otherNode)
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid("node", name),
		Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}}
	if g.oneIn(6) {
		base.Spec.ConfigSource = configSource("old")
	}
	op := pick(g, admissionv1.Create, admissionv1.Update, admissionv1.Update, admissionv1.Delete)
	wr := write("write a Node", coreV1, "nodes", "Node")
	if op == admissionv1.Update && g.coin() {
		wr.subresource = "status"
	}
	updated := base.DeepCopy()
	if op == admissionv1.Create {
		updated.Spec.ConfigSource = nil
	}
	for range 1 + g.r.IntN(2) {
		g.changeNode(updated)
	}
	return wr.withObjects(op, name, updated, base)
}

func configSource(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kubelet-configs", Name: name, KubeletConfigKey: "kubelet"}}
}

func (g *generator) changeNode(n *corev1.Node) {
	switch g.r.IntN(14) {
	case 0:
		n.Labels["topology.kubernetes.io/zone"] = "z"
	case 1:
		n.Labels["node-restriction.kubernetes.io/pool"] = "x"
	case 2:
		n.Labels["example.node-restriction.kubernetes.io/x"] = "x"
	case 3:
		n.Labels["foo.kubernetes.io/role"] = "x"
	case 4:
		n.Labels["example.com/team"] = "x"
	case 5:
		n.Labels["nodeguard.dev/pool"] = "blue"
	case 6:
		delete(n.Labels, "kubernetes.io/os")
	case 7:
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule})
	case 8:
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}}
	case 9:
		n.Spec.ConfigSource = configSource(pick(g, "old", "new"))
	case 10:
		n.Spec.ConfigSource = nil
	case 11:
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations["nodeguard.dev/config-source"] = "kubelet-configs/a"
	case 12:
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations["nodeguard.dev/previous-config-source"] = "kubelet-configs/a"
	default:
		n.Status.NodeInfo.KubeletVersion = "v1.37.2"
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
}
