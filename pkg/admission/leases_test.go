package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func leaseNamed(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: nodeLeaseNamespace, Name: name}}
}

func TestAdmitLease(t *testing.T) {
	lease := func(op admissionv1.Operation, namespace, name string, want string) write {
		w := write{user: nodeN1, op: op, group: "coordination.k8s.io", res: "leases", namespace: namespace, wantRefusal: want, wantRuleName: RuleNodeLeases}
		l := leaseNamed(name)
		l.Namespace = namespace
		switch op {
		case admissionv1.Create:
			w.object = l
		case admissionv1.Update:
			w.name, w.object, w.old = name, l, l
		default:
			w.name, w.old = name, l
		}
		return w
	}
	run(t, clusterAdmitter(t, nil), map[string]write{
		"create its own":                 lease(admissionv1.Create, nodeLeaseNamespace, "n1", ""),
		"renew its own":                  lease(admissionv1.Update, nodeLeaseNamespace, "n1", ""),
		"delete its own":                 lease(admissionv1.Delete, nodeLeaseNamespace, "n1", ""),
		"create another node's":          lease(admissionv1.Create, nodeLeaseNamespace, "n2", "Lease kube-node-lease/n2"),
		"renew another node's":           lease(admissionv1.Update, nodeLeaseNamespace, "n2", "Lease kube-node-lease/n2"),
		"delete another node's":          lease(admissionv1.Delete, nodeLeaseNamespace, "n2", "Lease kube-node-lease/n2"),
		"its own name in kube-system":    lease(admissionv1.Create, "kube-system", "n1", "only in namespace kube-node-lease"),
		"a leader election lease update": lease(admissionv1.Update, "kube-system", "kube-scheduler", "only in namespace kube-node-lease"),
	})
}
