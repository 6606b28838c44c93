package noderestrictiondiff

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// nodeWrite is one generated write, in the terms both deciders share.
type nodeWrite struct {
	// what says how it was generated, for a failure's report.
	what        string
	user        authenticationv1.UserInfo
	operation   admissionv1.Operation
	resource    schema.GroupVersionResource
	kind        schema.GroupVersionKind
	subresource string
	namespace   string
	name        string
	object, old runtime.Object
}

// noGraph is a graph without nodes or assignments: the differential judges
// NodeRestriction's rules, not rules 5 and 6.
type noGraph struct{}

func (noGraph) NodesAssignedTo(string, string) []string { return nil }
func (noGraph) Node(string) (*graph.NodeInfo, bool)     { return nil, false }

// newNodeguard is nodeguard's admitter as the webhook runs it, with the
// default settings (no self-assignment, no minimum version) and its lookups
// answered by a fake clientset holding the world.
func newNodeguard(w *world) *admission.Admitter {
	client := fake.NewClientset(w.objects...)
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		out := sar.DeepCopy()
		attrs := sar.Spec.ResourceAttributes
		out.Status.Allowed = attrs != nil && granted(sar.Spec.User, attrs.Verb, attrs.Resource)
		return true, out, nil
	})
	configMaps := corelisters.NewConfigMapLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	a := admission.New(func() *settings.Settings { return settings.Default() }, configMaps, noGraph{})
	a.SetCluster(admission.NewAPICluster(client, []string{apiAudience}))
	return a
}

// apiAudience is the apiserver's --api-audiences in this world.
const apiAudience = "https://kubernetes.default.svc"

// atTheWebhook is the write as the apiserver hands it to a validating
// webhook. NodeRestriction is a mutating plugin: it judges the object as
// the client sent it. The registry then prepares it (the update strategy
// of a status subresource keeps the stored spec, ...) and fills in
// defaults, and only then do validating webhooks see it:
//   - a TokenRequest that names no audience gets the apiserver's;
//   - pods/status keeps the stored spec and owner references, and resource
//     claim statuses a client left out;
//   - nodes/status keeps the stored spec; a Node that did not carry a
//     legacy spec.configSource loses a new one;
//   - persistentvolumeclaims/status keeps the stored spec.
func (wr *nodeWrite) atTheWebhook() *nodeWrite {
	out := *wr
	if wr.object == nil {
		return &out
	}
	obj := wr.object.DeepCopyObject()
	out.object = obj
	switch o := obj.(type) {
	case *authenticationv1.TokenRequest:
		if len(o.Spec.Audiences) == 0 {
			o.Spec.Audiences = []string{apiAudience}
		}
	case *corev1.Pod:
		old, ok := wr.old.(*corev1.Pod)
		if !ok || wr.subresource != "status" {
			break
		}
		o.Spec, o.OwnerReferences, o.DeletionTimestamp = old.Spec, old.OwnerReferences, nil
		if o.Status.ResourceClaimStatuses == nil {
			o.Status.ResourceClaimStatuses = old.Status.ResourceClaimStatuses
		}
		if o.Status.ExtendedResourceClaimStatus == nil {
			o.Status.ExtendedResourceClaimStatus = old.Status.ExtendedResourceClaimStatus
		}
		if o.Status.NodeAllocatableResourceClaimStatuses == nil {
			o.Status.NodeAllocatableResourceClaimStatuses = old.Status.NodeAllocatableResourceClaimStatuses
		}
	case *corev1.Node:
		old, _ := wr.old.(*corev1.Node)
		switch {
		case wr.subresource == "status" && old != nil:
			o.Spec = old.Spec
		case old == nil || old.Spec.ConfigSource == nil:
			o.Spec.ConfigSource = nil
		}
	case *corev1.PersistentVolumeClaim:
		if old, ok := wr.old.(*corev1.PersistentVolumeClaim); ok && wr.subresource == "status" {
			o.Spec = old.Spec
		}
	}
	return &out
}

// request is the write as the webhook receives it: the objects as JSON.
func (wr *nodeWrite) request() (*admissionv1.AdmissionRequest, error) {
	req := &admissionv1.AdmissionRequest{
		UID:         "diff",
		Kind:        metav1.GroupVersionKind{Group: wr.kind.Group, Version: wr.kind.Version, Kind: wr.kind.Kind},
		Resource:    metav1.GroupVersionResource{Group: wr.resource.Group, Version: wr.resource.Version, Resource: wr.resource.Resource},
		SubResource: wr.subresource,
		Name:        wr.name,
		Namespace:   wr.namespace,
		Operation:   wr.operation,
		UserInfo:    wr.user,
	}
	for _, o := range []struct {
		obj runtime.Object
		raw *runtime.RawExtension
	}{{wr.object, &req.Object}, {wr.old, &req.OldObject}} {
		if o.obj == nil {
			continue
		}
		data, err := json.Marshal(o.obj)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", wr.what, err)
		}
		o.raw.Raw = data
	}
	return req, nil
}

// nodeguardAdmits is nodeguard's decision: its built-in rules, which are
// what stands in for NodeRestriction (the Rego policies come after).
func nodeguardAdmits(ctx context.Context, a *admission.Admitter, wr *nodeWrite) (admission.Result, error) {
	req, err := wr.atTheWebhook().request()
	if err != nil {
		return admission.Result{}, err
	}
	decoded, err := admission.DecodeRequest(req)
	if err != nil {
		return admission.Result{}, err
	}
	return a.Admit(ctx, decoded), nil
}
