package admission

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// FuzzDecodeNode checks the gjson-based decoder against encoding/json: for
// any input encoding/json accepts as a Node, the fields the rules read must
// come out the same, and no input may panic.
func FuzzDecodeNode(f *testing.F) {
	for _, n := range []*corev1.Node{mkNode("n1"), mkNode("n2", withTaint("t"), withOwner("o"), withLegacySource("c"), withAssignment("a/b"))} {
		data, _ := json.Marshal(n)
		f.Add(data)
	}
	for _, s := range []string{`{}`, `[]`, `{"metadata":{"labels":{"a":1}}}`, `{"metadata":{"name":"x\u0041"},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`,
		`{"metadata":{"labels":null,"annotations":{"a":"b"}},"status":{"nodeInfo":{"kubeletVersion":"v1.2.3"}}}`,
		`{"metadata":{"annotations":{"nodeguard.dev/config-source":"a/b","other":"x"},"labels":{"a":"b","a":"c"}}}`, `{"metadata":{"name":"a"`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, rawLabels, err := decodeNode(runtime.RawExtension{Raw: data}, "object", true)
		if err == nil && got != nil {
			got.Labels, err = decodeLabels(rawLabels, "object")
		}
		var want corev1.Node
		if utiljson.Unmarshal(data, &want) != nil || err != nil {
			return
		}
		if want.Labels != nil && len(want.Labels) == 0 && got.Labels == nil {
			return
		}
		// Only the assignment annotation is kept.
		wantValue, wantAssigned := want.Annotations[contract.ConfigSourceAnnotation]
		gotValue, gotAssigned := got.Annotations[contract.ConfigSourceAnnotation]
		if got.Name != want.Name || !reflect.DeepEqual(got.Labels, want.Labels) || gotAssigned != wantAssigned || gotValue != wantValue || len(got.Annotations) > 1 ||
			!reflect.DeepEqual(got.OwnerReferences, want.OwnerReferences) || !reflect.DeepEqual(got.Spec.Taints, want.Spec.Taints) ||
			!reflect.DeepEqual(got.Spec.ConfigSource, want.Spec.ConfigSource) ||
			got.Status.NodeInfo.KubeletVersion != want.Status.NodeInfo.KubeletVersion {
			t.Fatalf("decodeNode(%q) = %+v, encoding/json gives %+v", data, got, want)
		}
	})
}

// FuzzReview feeds arbitrary bodies to the /validate review function: it
// must answer or return an error, never panic.
func FuzzReview(f *testing.F) {
	t := &testing.T{}
	review := ReviewFunc(newAdmitter(t, config.Default()), nil)
	valid := reviewBody(t, "admission.k8s.io/v1", nodeReq(n1User, admissionv1.Update, "status", "n1", mkNode("n1"), mkNode("n1")).build(t))
	f.Add(valid)
	f.Add(reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Create, eligibleCM("x", goodConfig), nil).build(t)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"nodes"},"operation":"UPDATE","object":{"metadata":7},"oldObject":[]}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"configmaps"},"operation":"CREATE","object":{"metadata":{"labels":{"nodeguard.dev/kubelet-config":"true"}},"data":{"kubelet":"{{{"}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := review(context.Background(), body)
		if err == nil {
			if r := resp.(*admissionv1.AdmissionReview).Response; r == nil || r.UID == "" {
				t.Fatalf("answer without a UID for %q", body)
			}
		}
	})
}

// FuzzDecodeAdmissionReview checks the fast review decoder against the
// reflective one: both accept the same inputs and produce the same review.
func FuzzDecodeAdmissionReview(f *testing.F) {
	t := &testing.T{}
	f.Add(reviewBody(t, "admission.k8s.io/v1", nodeReq(n1User, admissionv1.Update, "status", "n1", mkNode("n1"), mkNode("n1")).build(t)))
	f.Add(reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Create, eligibleCM("x", goodConfig), nil).build(t)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":true,"options":{"a":1},"requestKind":{"group":"","version":"v1","kind":"Node"},"userInfo":{"username":"u","extra":{"k":["v"]}},"object":null}}`))
	f.Add([]byte(`{"request":{"userInfo":{"groups":[1]}}}`))
	f.Add([]byte(`{"request":{"kind":{"kind":"A"},"kind":{"group":"B"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, _, gotErr := decodeReview(body)
		var want admissionv1.AdmissionReview
		wantErr := utiljson.Unmarshal(body, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("decodeReview(%q) error %v, reflective decoder %v", body, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeReview(%q) =\n%#v\nreflective decoder:\n%#v", body, got, want)
		}
	})
}

// FuzzDecodeConfigMap checks the gjson-based ConfigMap decoder against
// encoding/json as FuzzDecodeNode checks the Node decoder.
func FuzzDecodeConfigMap(f *testing.F) {
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelet-configs", Name: "pool", Labels: map[string]string{"nodeguard.dev/kubelet-config": "true"}},
			Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bin"}, BinaryData: map[string][]byte{"kubelet": []byte("x")}},
	} {
		data, _ := json.Marshal(cm)
		f.Add(data)
	}
	for _, s := range []string{`{}`, `{"data":null}`, `{"data":{"k":1}}`, `{"data":{"k":"\ud800"}}`, `{"data":{"\u006b":"v\u00e9"}}`, `{"data":{"kubelet":"a\u00e9\n\ud800"}}`, `{"data":{"kub\u0065let":"x","kubelet":"y"}}`,
		`{"metadata":{"name":null,"labels":{"a":"b"}},"data":{"a":"x"},"data":{"b":"y"}}`, `{"metadata":{"namespace":"n"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeConfigMap(runtime.RawExtension{Raw: data}, "object")
		var want corev1.ConfigMap
		if utiljson.Unmarshal(data, &want) != nil || err != nil {
			return
		}
		config, hasConfig := want.Data[contract.ConfigMapKey]
		var gotConfig string
		if got.quotedConfig != "" {
			if err := json.Unmarshal([]byte(got.quotedConfig), &gotConfig); err != nil {
				t.Fatalf("decodeConfigMap(%q) kept %q, not a JSON string: %v", data, got.quotedConfig, err)
			}
		}
		if got.name != want.Name || got.namespace != want.Namespace || !reflect.DeepEqual(got.labels, want.Labels) ||
			(got.quotedConfig != "") != hasConfig || gotConfig != config || !reflect.DeepEqual(got.binaryData, want.BinaryData) {
			t.Fatalf("decodeConfigMap(%q) = %+v, encoding/json gives %+v", data, got, want)
		}
	})
}
