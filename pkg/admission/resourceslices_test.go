package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestAdmitResourceSlice(t *testing.T) {
	slice := func(op admissionv1.Operation, nodeName *string, want string) write {
		obj := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: nodeName}}
		w := write{user: nodeN1, op: op, group: "resource.k8s.io", res: "resourceslices", wantRefusal: want, wantRuleName: RuleNodeResourceSlices}
		switch op {
		case admissionv1.Create:
			w.object = obj
		case admissionv1.Update:
			w.name, w.object, w.old = "s", obj, obj
		default:
			w.name, w.old = "s", obj
		}
		return w
	}
	run(t, clusterAdmitter(t, nil), map[string]write{
		"create its own":            slice(admissionv1.Create, ptr.To("n1"), ""),
		"delete its own":            slice(admissionv1.Delete, ptr.To("n1"), ""),
		"create another node's":     slice(admissionv1.Create, ptr.To("n2"), "for node n2"),
		"create one for no node":    slice(admissionv1.Create, nil, "for no node"),
		"delete another node's":     slice(admissionv1.Delete, ptr.To("n2"), "for node n2"),
		"delete one for no node":    slice(admissionv1.Delete, nil, "for no node"),
		"update (the authorizer's)": slice(admissionv1.Update, ptr.To("n2"), ""),
	})
}
