package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAdmitCSINode(t *testing.T) {
	csiNode := func(op admissionv1.Operation, sub, name, want string) write {
		obj := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		w := write{user: nodeN1, op: op, group: "storage.k8s.io", res: "csinodes", sub: sub, wantRefusal: want, wantRuleName: RuleNodeCSINodes}
		switch op {
		case admissionv1.Create:
			w.object = obj
		case admissionv1.Update:
			w.name, w.object, w.old = name, obj, obj
		default:
			w.name, w.old = name, obj
		}
		return w
	}
	run(t, clusterAdmitter(t, nil), map[string]write{
		"create its own":        csiNode(admissionv1.Create, "", "n1", ""),
		"update its own":        csiNode(admissionv1.Update, "", "n1", ""),
		"delete its own":        csiNode(admissionv1.Delete, "", "n1", ""),
		"create another node's": csiNode(admissionv1.Create, "", "n2", `CSINode "n2"`),
		"update another node's": csiNode(admissionv1.Update, "", "n2", `CSINode "n2"`),
		"delete another node's": csiNode(admissionv1.Delete, "", "n2", `CSINode "n2"`),
		"its own status":        csiNode(admissionv1.Update, "status", "n1", "csinodes/status"),
		"another node's status": csiNode(admissionv1.Update, "status", "n2", `CSINode "n2"`),
	})
}
