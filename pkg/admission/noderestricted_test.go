package admission

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// The identities the tests write as.
var (
	nodeN1       = reviewtest.N1User
	namelessNode = authenticationv1.UserInfo{Username: "system:node:", Groups: []string{"system:nodes"}}
	alice        = authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
)

// n1UID is node n1's UID in the test cluster.
const n1UID = types.UID("uid-n1")

// testAPIAudience is the test apiserver's --api-audiences, which it fills
// into token requests that name none.
const testAPIAudience = "https://kubernetes.default.svc"

// write is one request of a test, in the terms of the review.
type write struct {
	user         authenticationv1.UserInfo
	op           admissionv1.Operation
	group, res   string
	sub          string
	namespace    string
	name         string
	object, old  any
	version      string
	wantRefusal  string // "" means allowed
	wantRuleName contract.Rule
}

func (w write) request(t *testing.T) *admissionv1.AdmissionRequest {
	t.Helper()
	v := w.version
	if v == "" {
		v = "v1"
	}
	req := &admissionv1.AdmissionRequest{
		UID: "u", UserInfo: w.user, Operation: w.op, SubResource: w.sub, Namespace: w.namespace, Name: w.name,
		Resource: metav1.GroupVersionResource{Group: w.group, Version: v, Resource: w.res},
	}
	req.Object, req.OldObject = reviewtest.Raw(t, w.object), reviewtest.Raw(t, w.old)
	return req
}

// clusterAdmitter is an Admitter whose Cluster is an APICluster over a
// fake clientset holding objs; allow answers its SubjectAccessReviews.
func clusterAdmitter(t *testing.T, allow func(authorizationv1.SubjectAccessReviewSpec) bool, objs ...runtime.Object) *Admitter {
	t.Helper()
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		out := sar.DeepCopy()
		out.Status.Allowed = allow != nil && allow(sar.Spec)
		return true, out, nil
	})
	a := New(func() *settings.Settings { return &settings.Settings{} }, nil, nil)
	a.SetCluster(NewAPICluster(client, []string{testAPIAudience}))
	return a
}

// run admits each write and checks the outcome.
func run(t *testing.T, a *Admitter, writes map[string]write) {
	t.Helper()
	for name, w := range writes {
		t.Run(name, func(t *testing.T) {
			got := admitReview(t.Context(), a, w.request(t))
			if w.wantRefusal == "" {
				if !got.Allowed {
					t.Fatalf("refused: %s: %s", got.Rule, got.Message)
				}
				return
			}
			if got.Allowed {
				t.Fatalf("allowed, want a refusal mentioning %q", w.wantRefusal)
			}
			if !strings.Contains(got.Message, w.wantRefusal) {
				t.Fatalf("refused with %q (%s), want a refusal mentioning %q", got.Message, got.Rule, w.wantRefusal)
			}
			if w.wantRuleName != "" && got.Rule != w.wantRuleName {
				t.Fatalf("refused by %q, want %q", got.Rule, w.wantRuleName)
			}
		})
	}
}

func node(name string, uid types.UID) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
}

func TestNodeRestrictedResourcesOnlyForNodes(t *testing.T) {
	a := clusterAdmitter(t, nil)
	lease := leaseNamed("n2")
	run(t, a, map[string]write{
		"an administrator writes any lease": {user: alice, op: admissionv1.Create, group: "coordination.k8s.io", res: "leases",
			namespace: "kube-node-lease", object: lease},
		"a node without a name writes a lease": {user: namelessNode, op: admissionv1.Create, group: "coordination.k8s.io", res: "leases",
			namespace: "kube-node-lease", object: leaseNamed(""), wantRefusal: "does not name a node", wantRuleName: RuleNodeUnidentifiedWrite},
		"a node without a name writes a pod": {user: namelessNode, op: admissionv1.Create, res: "pods", namespace: "default",
			object: mirrorPod(""), wantRefusal: "does not name a node"},
		"a node connects":                {user: nodeN1, op: admissionv1.Connect, res: "pods", sub: "exec", namespace: "default", name: "p"},
		"a node writes another resource": {user: nodeN1, op: admissionv1.Create, res: "events", namespace: "default", object: &corev1.Event{}},
	})
}

func TestAdmitWithoutClusterRefuses(t *testing.T) {
	a := New(func() *settings.Settings { return &settings.Settings{} }, nil, nil)
	got := admitReview(t.Context(), a, write{user: nodeN1, op: admissionv1.Create, res: "pods", namespace: "kube-system", object: mirrorPod("n1")}.request(t))
	if got.Allowed || !strings.Contains(got.Message, "without access to the cluster") {
		t.Fatalf("got %+v", got)
	}
}
