package reviewtest

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

// Graph builds a real graph: n1 (v1.37.2) is assigned ns/assigned and
// runs a pod using ns/podcm; n2 (v1.30.0) is assigned ns/other; n3 reports
// garbage as its version; ns/ineligible is pointed at by n4 but unlabelled.
// It is marked synced when synced is.
func Graph(synced bool) *graph.Graph {
	g := graph.New(nil)
	for _, cm := range []struct {
		name     string
		eligible bool
	}{{"assigned", true}, {"other", true}, {"ineligible", false}} {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: cm.name}}
		if cm.eligible {
			obj.Labels = map[string]string{contract.EligibleLabel: "true"}
		}
		g.UpsertConfigMap(obj)
	}
	for _, n := range []struct{ name, version, source string }{
		{"n1", "v1.37.2", "ns/assigned"}, {"n2", "v1.30.0", "ns/other"}, {"n3", "garbage", ""}, {"n4", "v1.37.0", "ns/ineligible"},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, ResourceVersion: "1"}}
		node.Status.NodeInfo.KubeletVersion = n.version
		if n.source != "" {
			node.Annotations = map[string]string{contract.ConfigSourceAnnotation: n.source}
		}
		g.UpsertNode(node)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	pod.Spec.NodeName = "n1"
	pod.Spec.Volumes = []corev1.Volume{{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "podcm"}}}}}
	g.UpsertPod(pod)
	if synced {
		g.MarkSynced()
	}
	return g
}

// StaleGraph is a synced graph whose watches have been cut for longer
// than the staleness bound.
type StaleGraph struct{ *graph.Graph }

func (StaleGraph) Stale() bool { return true }

// NodeGroups are the groups a node authenticates with.
var NodeGroups = []string{"system:nodes", "system:authenticated"}

// NodeSpec is a review of what node asks to do (ra; nil for a non-resource
// request).
func NodeSpec(node string, ra *authorizationv1.ResourceAttributes) *authorizationv1.SubjectAccessReviewSpec {
	return &authorizationv1.SubjectAccessReviewSpec{User: "system:node:" + node, Groups: NodeGroups, ResourceAttributes: ra}
}

// ConfigMapRead is verb on the ConfigMap namespace/name (name may be empty).
func ConfigMapRead(verb, namespace, name string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "configmaps", Namespace: namespace, Name: name}
}

// NodeAccess is verb on the Node name's subresource (both may be empty).
func NodeAccess(verb, name, subresource string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: "nodes", Name: name, Subresource: subresource}
}
