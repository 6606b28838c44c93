package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

func reviewBody(t *testing.T, apiVersion string, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestReviewFunc(t *testing.T) {
	review := ReviewFunc(newAdmitter(t, config.Default()), nil)
	refused := nodeReq(n1User, admissionv1.Update, "", "n2", mkNode("n2"), mkNode("n2")).build(t)
	refused.UID = "refused-uid"
	allowed := nodeReq(n1User, admissionv1.Update, "status", "n1", mkNode("n1"), mkNode("n1")).build(t)
	allowed.UID = "allowed-uid"
	noUID := nodeReq(n1User, admissionv1.Update, "", "n1", mkNode("n1"), mkNode("n1")).build(t)
	noUID.UID = ""
	// An object that names its own node first and another one last: the
	// rules stop reading once they have the metadata and spec, where
	// encoding/json would take the last.
	repeated := []byte(strings.Replace(string(reviewBody(t, "admission.k8s.io/v1", allowed)), `},"oldObject":`, `,"metadata":{"name":"n2"}},"oldObject":`, 1))
	repeatedInMetadata := []byte(strings.Replace(string(reviewBody(t, "admission.k8s.io/v1", allowed)), `"object":{"metadata":{`, `"object":{"metadata":{"name":"n2",`, 1))

	for _, tt := range []struct {
		name    string
		body    []byte
		wantErr string
		wantUID string
		allowed bool
		// wantRule is the refusal's rule; "" is rule 1.
		wantRule contract.Rule
	}{
		{"refusal echoes the uid", reviewBody(t, "admission.k8s.io/v1", refused), "", "refused-uid", false, ""},
		{"allow echoes the uid", reviewBody(t, "admission.k8s.io/v1", allowed), "", "allowed-uid", true, ""},
		{"v1beta1", reviewBody(t, "admission.k8s.io/v1beta1", allowed), "expected admission.k8s.io/v1 AdmissionReview", "", false, ""},
		{"no request", reviewBody(t, "admission.k8s.io/v1", nil), "has no request", "", false, ""},
		{"no uid", reviewBody(t, "admission.k8s.io/v1", noUID), "has no uid", "", false, ""},
		{"not JSON", []byte("\x00\x01"), "decoding AdmissionReview", "", false, ""},
		{"wrong type", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}`), "decoding", "", false, ""},
		{"object repeats a key", repeated, "", "allowed-uid", false, RuleMalformed},
		{"object's metadata repeats a key", repeatedInMetadata, "", "allowed-uid", false, RuleMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := review(context.Background(), tt.body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out := resp.(*admissionv1.AdmissionReview)
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Request != nil {
				t.Fatalf("response envelope = %+v", out.TypeMeta)
			}
			r := out.Response
			if string(r.UID) != tt.wantUID || r.Allowed != tt.allowed {
				t.Fatalf("response = %+v", r)
			}
			if tt.wantRule == "" {
				tt.wantRule = contract.RuleOwnNode
			}
			if !tt.allowed && (r.Result == nil || r.Result.Code != 403 || !strings.Contains(r.Result.Message, "nodeguard "+string(tt.wantRule))) {
				t.Fatalf("refusal status = %+v", r.Result)
			}
		})
	}
}

func TestReviewFuncRecoversAndHonoursDeadline(t *testing.T) {
	// A nil lister makes rule 5 panic when it looks a ConfigMap up.
	a := New(config.Default, nil, fakeGraph{})
	review := ReviewFunc(a, nil)
	req := nodeReq(adminUser, admissionv1.Update, "", "n2", mkNode("n2", withAssignment("cfg/good")), mkNode("n2")).build(t)
	resp, err := review(context.Background(), reviewBody(t, "admission.k8s.io/v1", req))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*admissionv1.AdmissionReview).Response; r.Allowed || r.UID != req.UID || !strings.Contains(r.Result.Message, string(RuleInternal)) {
		t.Fatalf("after panic: %+v %+v", r, r.Result)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err = review(ctx, reviewBody(t, "admission.k8s.io/v1", req))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*admissionv1.AdmissionReview).Response; r.Allowed || !strings.Contains(r.Result.Message, "deadline") {
		t.Fatalf("past deadline: %+v", r.Result)
	}
}

// BenchmarkAdmitNodeStatusUpdate measures the in-process decision for the
// most frequent request in a cluster, a kubelet's status update, from the
// decoded AdmissionRequest (objects still raw JSON) to the answer.
func BenchmarkAdmitNodeStatusUpdate(b *testing.B) {

	a := newAdmitter(&testing.T{}, &config.Settings{MinKubeletVersion: version137})
	node := mkNode("n1", withAssignment("cfg/good"))
	for i := 0; i < 40; i++ {
		node.Status.Images = append(node.Status.Images, corev1Image(i))
	}
	// A kubelet's Node carries managed fields for itself and the control
	// plane; they sit in metadata, which every rule reads.
	fields := `{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.0.0/24\"":{}}},"f:status":{"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:kernelVersion":{}}}}`
	for _, manager := range []string{"kubelet", "kube-controller-manager", "kubeadm"} {
		node.ManagedFields = append(node.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}})
	}
	req := nodeReq(n1User, admissionv1.Update, "status", "n1", node, node).build(&testing.T{})
	b.ReportAllocs()
	for b.Loop() {
		if r := a.Admit(context.Background(), req); !r.Allowed {
			b.Fatal(r.Message)
		}
	}
}
