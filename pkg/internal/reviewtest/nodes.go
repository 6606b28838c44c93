package reviewtest

import (
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// NodeOption changes a Node that Node makes.
type NodeOption func(*corev1.Node)

// Node is a Node named name, labelled with its hostname, reporting kubelet
// v1.37.2 and one image, changed by opts.
func Node(name string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// WithLabel sets the label k to v.
func WithLabel(k, v string) NodeOption { return func(n *corev1.Node) { n.Labels[k] = v } }

// WithKubelet makes the Node report kubelet version v.
func WithKubelet(v string) NodeOption {
	return func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v }
}

// WithAssignment assigns the Node the ConfigMap v ("namespace/name").
func WithAssignment(v string) NodeOption {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[contract.ConfigSourceAnnotation] = v
	}
}

// Image is the i-th of the images a busy Node reports.
func Image(i int) corev1.ContainerImage {
	return corev1.ContainerImage{Names: []string{"registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "registry.example.com/team/app:v" + strings.Repeat("1", i%5+1)}, SizeBytes: int64(1000000 + i)}
}

// NodeRequest is a write of a Node (sub is its subresource, name the
// request's name); a nil object or old is absent.
func NodeRequest(user authenticationv1.UserInfo, op admissionv1.Operation, sub, name string, object, old *corev1.Node) Request {
	r := Request{User: user, Operation: op, Resource: "nodes", Subresource: sub, Name: name}
	if object != nil {
		r.Object = object
	}
	if old != nil {
		r.Old = old
	}
	return r
}
