package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
)

// The benchmarks compare what the shipped policies cost with the in-process
// work the webhook does for the same review anyway (decoding it, deciding
// with the built-in rules), so that `make bench` shows the ratio the issue
// sets a target for (policies add at most 50%).

// benchNode is a kubelet's Node as it looks in a real cluster: labels,
// annotations, managed fields, conditions and a list of images. Status
// updates of such Nodes are the most frequent admission requests.
func benchNode(name string) *corev1.Node {
	node := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: "6a3c7e0e-1f6f-4bfa-9c59-2f0d1a1f5e01", ResourceVersion: "123456",
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": "zone-a",
				"nodeguard.dev/pool": "gpu",
			},
			Annotations: map[string]string{
				"nodeguard.dev/config-source":                            "kube-system/kubelet-gpu",
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13", ContainerRuntimeVersion: "containerd://2.1.0"},
		},
	}
	for _, c := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: c, Status: corev1.ConditionFalse, Reason: "Kubelet" + string(c), Message: "kubelet reports " + string(c),
		})
	}
	for i := range 40 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/team/image-%d@sha256:%064d", i, i), fmt.Sprintf("registry.example/team/image-%d:v1.%d", i, i)},
			SizeBytes: int64(10_000_000 + i),
		})
	}
	fields := []byte(`{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{}},"f:labels":{".":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}},"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{}}}}`)
	for _, manager := range []string{"kubelet", "kube-controller-manager", "kubeadm"} {
		node.ManagedFields = append(node.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields},
		})
	}
	return node
}

func mustJSON(b *testing.B, v any) []byte {
	b.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// reviewBody is an AdmissionReview as the apiserver posts it.
func reviewBody(b *testing.B, req *admissionv1.AdmissionRequest) []byte {
	return mustJSON(b, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
}

func nodeStatusUpdate(b *testing.B) *admissionv1.AdmissionRequest {
	node := benchNode("node-1")
	return &admissionv1.AdmissionRequest{
		UID:         "705ab4f5-6393-11e8-b7cc-42010a800002",
		Kind:        metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		SubResource: "status",
		Name:        "node-1",
		Operation:   admissionv1.Update,
		Object:      runtime.RawExtension{Raw: mustJSON(b, node)},
		OldObject:   runtime.RawExtension{Raw: mustJSON(b, node)},
	}
}

func configMapUpdate(b *testing.B) (*admissionv1.AdmissionRequest, *corev1.ConfigMap) {
	kubelet, err := os.ReadFile("../kubeletconfig/testdata/kubelet-4k.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kubelet-gpu", Namespace: "kube-system", ResourceVersion: "42",
			Labels: map[string]string{"nodeguard.dev/kubelet-config": "true"},
		},
		Data: map[string]string{"kubelet": string(kubelet)},
	}
	raw := mustJSON(b, cm)
	return &admissionv1.AdmissionRequest{
		UID:       "705ab4f5-6393-11e8-b7cc-42010a800003",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Name:      "kubelet-gpu",
		Namespace: "kube-system",
		Operation: admissionv1.Update,
		Object:    runtime.RawExtension{Raw: raw},
		OldObject: runtime.RawExtension{Raw: raw},
	}, cm
}

func benchGraph() *graph.Graph {
	g := graph.New(nil)
	g.UpsertNode(benchNode("node-1"))
	g.UpsertConfigMap(&metav1.ObjectMeta{
		Name: "kubelet-gpu", Namespace: "kube-system",
		Labels: map[string]string{"nodeguard.dev/kubelet-config": "true"},
	})
	g.MarkSynced()
	return g
}

func benchEngine(b *testing.B, g policy.GraphReader) *policy.Engine {
	e, err := policy.New(context.Background(), policy.Options{Graph: g})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkAdmission: "baseline" is work every such request needs anyway:
// decoding the review, and for a ConfigMap decoding and validating the
// configurations it carries; "policies" is EvalAdmission on the shipped
// policies, input rendering included.
func BenchmarkAdmission(b *testing.B) {
	e := benchEngine(b, benchGraph())
	nodeReq := nodeStatusUpdate(b)
	cmReq, cm := configMapUpdate(b)
	cfg, err := kubeletconfig.DecodeConfigMap(cm)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("node-status/baseline-review-decode", func(b *testing.B) {
		// What the webhook pays before any rule: decoding the review. The
		// built-in rules then decode the objects (see
		// pkg/admission's BenchmarkAdmitNodeStatusUpdate).
		body := reviewBody(b, nodeReq)
		b.ReportAllocs()
		for b.Loop() {
			var review admissionv1.AdmissionReview
			if err := utiljson.Unmarshal(body, &review); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("node-status/policies", func(b *testing.B) {
		in := &policy.AdmissionInput{Request: nodeReq, Node: "node-1", KubeletVersion: "v1.37.2"}
		b.ReportAllocs()
		for b.Loop() {
			res, err := e.EvalAdmission(context.Background(), in)
			if err != nil || res.Denied() {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("configmap/baseline-decode-validate", func(b *testing.B) {
		body := reviewBody(b, cmReq)
		b.ReportAllocs()
		for b.Loop() {
			var review admissionv1.AdmissionReview
			var newCM, oldCM corev1.ConfigMap
			if json.Unmarshal(body, &review) != nil ||
				json.Unmarshal(review.Request.Object.Raw, &newCM) != nil ||
				json.Unmarshal(review.Request.OldObject.Raw, &oldCM) != nil {
				b.Fatal("decode")
			}
			newCfg, err := kubeletconfig.DecodeConfigMap(&newCM)
			if err != nil {
				b.Fatal(err)
			}
			oldCfg, err := kubeletconfig.DecodeConfigMap(&oldCM)
			if err != nil {
				b.Fatal(err)
			}
			if errs := kubeletconfig.Validate(newCfg); len(errs) > 0 {
				b.Fatal(errs)
			}
			_ = kubeletconfig.Diff(oldCfg, newCfg)
		}
	})
	b.Run("configmap/policies", func(b *testing.B) {
		// In kube-system and with dangerous fields: config_namespaces and
		// dangerous_fields deny it, so every rule runs to its end.
		in := &policy.AdmissionInput{Request: cmReq, KubeletConfig: cfg, OldKubeletConfig: cfg}
		b.ReportAllocs()
		for b.Loop() {
			res, err := e.EvalAdmission(context.Background(), in)
			if err != nil || !res.Denied() {
				b.Fatal(err, res)
			}
		}
	})
}

// BenchmarkAuthz: "baseline-authorize" is the built-in decision alone;
// "baseline-review" adds decoding the SubjectAccessReview and building the
// answer, which every request pays; "policies" is EvalAuthz on the shipped
// policies for a node reading its assigned configuration, the case where
// the maintenance policy runs to the end and calls nodeguard.node.
func BenchmarkAuthz(b *testing.B) {
	g := benchGraph()
	e := benchEngine(b, g)
	a := authz.New(g, nil)
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:   "system:node:node-1",
		Groups: []string{"system:nodes", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "kube-system", Verb: "watch", Version: "v1", Resource: "configmaps", Name: "kubelet-gpu",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "metadata.name=kubelet-gpu"},
		},
	}
	body := mustJSON(b, &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     spec,
	})

	b.Run("node-configmap/baseline-authorize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := a.Authorize(&spec); r.Decision != authz.Allow {
				b.Fatal(r)
			}
		}
	})
	b.Run("node-configmap/baseline-review", func(b *testing.B) {
		review := reviewOf(server.Authorize(a, nil, 1<<20))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := review(context.Background(), body); err != nil {
				b.Fatal(err)
			}
		}
	})
	lease := authorizationv1.SubjectAccessReviewSpec{
		User:   "system:node:node-1",
		Groups: []string{"system:nodes", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "kube-node-lease", Verb: "update", Group: "coordination.k8s.io", Version: "v1",
			Resource: "leases", Name: "node-1",
		},
	}
	leaseBody := mustJSON(b, &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     lease,
	})
	b.Run("node-lease/baseline-review", func(b *testing.B) {
		review := reviewOf(server.Authorize(a, nil, 1<<20))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := review(context.Background(), leaseBody); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A lease renewal, every node's most frequent request: no shipped rule
	// can match, and the rule index says so without an evaluation.
	b.Run("node-lease/policies", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			node, version, labels := policy.NodeOf(lease.User, lease.Groups, g)
			res, err := e.EvalAuthz(context.Background(), &policy.AuthzInput{Spec: &lease, Node: node, KubeletVersion: version, NodeLabels: labels})
			if err != nil || res.Denied() {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("node-configmap/policies", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			node, version, labels := policy.NodeOf(spec.User, spec.Groups, g)
			res, err := e.EvalAuthz(context.Background(), &policy.AuthzInput{Spec: &spec, Node: node, KubeletVersion: version, NodeLabels: labels})
			if err != nil || res.Denied() {
				b.Fatal(err, res)
			}
		}
	})
}
