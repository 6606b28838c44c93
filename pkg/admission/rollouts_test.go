package admission

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

func mkRollout(selector metav1.LabelSelector) *v1alpha1.KubeletConfigRollout {
	return &v1alpha1.KubeletConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "KubeletConfigRollout"},
		ObjectMeta: metav1.ObjectMeta{Name: "pool-blue"},
		Spec: v1alpha1.KubeletConfigRolloutSpec{NodeSelector: selector,
			ConfigMapRef: contract.ConfigMapRef{Namespace: "cfg", Name: "good"}},
	}
}

func matchLabels(kv ...string) metav1.LabelSelector {
	s := metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func rolloutReq(t *testing.T, user authenticationv1.UserInfo, op admissionv1.Operation, object, old *v1alpha1.KubeletConfigRollout) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", UserInfo: user, Operation: op, Name: "pool-blue",
		Resource: metav1.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "kubeletconfigrollouts"},
	}
	if object != nil {
		req.Object = reviewtest.Raw(t, object)
	}
	if old != nil {
		req.OldObject = reviewtest.Raw(t, old)
	}
	return req
}

func TestAdmitRolloutSelector(t *testing.T) {
	const C, U = admissionv1.Create, admissionv1.Update
	const In, NotIn, Exists, DoesNotExist = metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist
	withExprs := func(s metav1.LabelSelector, e ...metav1.LabelSelectorRequirement) metav1.LabelSelector {
		s.MatchExpressions = e
		return s
	}
	tests := []struct {
		name     string
		user     authenticationv1.UserInfo
		op       admissionv1.Operation
		object   *v1alpha1.KubeletConfigRollout
		old      *v1alpha1.KubeletConfigRollout
		wantRule contract.Rule // empty: allowed
		wantText []string      // each in the message when refused
	}{
		{"the pool label", reviewtest.AdminUser, C, mkRollout(matchLabels(contract.PoolLabel, "blue")), nil, "", nil},
		{"a node-restriction label", reviewtest.AdminUser, C, mkRollout(matchLabels("node-restriction.kubernetes.io/pool", "blue")), nil, "", nil},
		{"a nodeguard.dev subdomain", reviewtest.AdminUser, C, mkRollout(matchLabels("team.nodeguard.dev/pool", "blue")), nil, "", nil},
		{"a control-plane kubernetes.io label", reviewtest.AdminUser, C, mkRollout(matchLabels("node-role.kubernetes.io/worker", "")), nil, "", nil},
		{"the pool label beside node-writable ones", reviewtest.AdminUser, C, mkRollout(matchLabels(contract.PoolLabel, "blue", "pool", "blue", "kubernetes.io/os", "linux")), nil, "", nil},
		{"In on the pool label", reviewtest.AdminUser, C, mkRollout(withExprs(metav1.LabelSelector{}, expr(contract.PoolLabel, In, "blue", "green"))), nil, "", nil},
		{"Exists on the pool label", reviewtest.AdminUser, C, mkRollout(withExprs(matchLabels("pool", "blue"), expr(contract.PoolLabel, Exists))), nil, "", nil},

		{"a node-writable label", reviewtest.AdminUser, C, mkRollout(matchLabels("pool", "blue")), nil, RuleRolloutSelector,
			[]string{`KubeletConfigRollout "pool-blue"`, `nodes may write "pool" themselves`, "nodeguard.dev/pool", "kubectl label node NAME nodeguard.dev/pool=blue"}},
		{"kubelet labels", reviewtest.AdminUser, C, mkRollout(matchLabels("kubernetes.io/os", "linux", "topology.kubernetes.io/zone", "a")), nil, RuleRolloutSelector,
			[]string{`nodes may write "kubernetes.io/os", "topology.kubernetes.io/zone" themselves`}},
		{"In on a node-writable label", reviewtest.AdminUser, C, mkRollout(withExprs(metav1.LabelSelector{}, expr("pool", In, "blue"))), nil, RuleRolloutSelector, []string{`"pool"`}},
		{"NotIn on the pool label does not count", reviewtest.AdminUser, C, mkRollout(withExprs(matchLabels("pool", "blue"), expr(contract.PoolLabel, NotIn, "gpu"))), nil, RuleRolloutSelector,
			[]string{`nodes may write "pool" themselves`, `"nodeguard.dev/pool" appear only under NotIn or DoesNotExist`}},
		{"DoesNotExist on the pool label alone", reviewtest.AdminUser, C, mkRollout(withExprs(metav1.LabelSelector{}, expr(contract.PoolLabel, DoesNotExist))), nil, RuleRolloutSelector,
			[]string{`"nodeguard.dev/pool" appear only under NotIn or DoesNotExist`}},
		{"an exempt user too", reviewtest.Exempt, C, mkRollout(matchLabels("pool", "blue")), nil, RuleRolloutSelector, nil},
		{"an invalid selector", reviewtest.AdminUser, C, mkRollout(withExprs(metav1.LabelSelector{}, expr(contract.PoolLabel, In))), nil, RuleRolloutSelector, []string{"not a valid label selector"}},

		{"update to a node-writable selector", reviewtest.AdminUser, U, mkRollout(matchLabels("pool", "blue")), mkRollout(matchLabels(contract.PoolLabel, "blue")), RuleRolloutSelector, []string{`"pool"`}},
		{"update to the pool label", reviewtest.AdminUser, U, mkRollout(matchLabels(contract.PoolLabel, "blue")), mkRollout(matchLabels("pool", "blue")), "", nil},
		{"update that leaves an old selector alone", reviewtest.AdminUser, U,
			func() *v1alpha1.KubeletConfigRollout {
				r := mkRollout(matchLabels("pool", "blue"))
				r.Spec.Paused = true
				return r
			}(), mkRollout(matchLabels("pool", "blue")), "", nil},
		{"update without the old object", reviewtest.AdminUser, U, mkRollout(matchLabels(contract.PoolLabel, "blue")), nil, RuleMalformed, []string{"without the old object"}},
		{"create without the object", reviewtest.AdminUser, C, nil, nil, RuleMalformed, []string{"without the object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := admitReview(context.Background(), newAdmitter(t, &settings.Settings{ExemptUsers: []string{reviewtest.Exempt.Username}}), rolloutReq(t, tt.user, tt.op, tt.object, tt.old))
			if tt.wantRule == "" {
				if !got.Allowed {
					t.Fatalf("refused: %s: %s", got.Rule, got.Message)
				}
				return
			}
			if got.Allowed || got.Rule != tt.wantRule {
				t.Fatalf("got allowed=%v %s: %q; want %s", got.Allowed, got.Rule, got.Message, tt.wantRule)
			}
			for _, want := range tt.wantText {
				if !strings.Contains(got.Message, want) {
					t.Errorf("message %q does not mention %q", got.Message, want)
				}
			}
			if got.NodeState {
				t.Error("a refused selector is about the rollout, not a Node's state")
			}
		})
	}
}

// TestAdmitRolloutDecodesStrictly: a rollout that does not decode into the
// API type, field for field, is refused with the reason.
func TestAdmitRolloutDecodesStrictly(t *testing.T) {
	a := newAdmitter(t, settings.Default())
	for _, tc := range []struct{ name, object, want string }{
		{"unknown field", `{"apiVersion":"nodeguard.dev/v1alpha1","kind":"KubeletConfigRollout","metadata":{"name":"r"},"spec":{"nodeSelectr":{"matchLabels":{"nodeguard.dev/pool":"a"}}}}`, "nodeSelectr"},
		{"wrong type", `{"apiVersion":"nodeguard.dev/v1alpha1","kind":"KubeletConfigRollout","metadata":{"name":"r"},"spec":{"nodeSelector":{"matchLabels":["nodeguard.dev/pool"]}}}`, "matchLabels"},
		{"not an object", `[]`, "KubeletConfigRollout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := rolloutReq(t, reviewtest.AdminUser, admissionv1.Create, nil, nil)
			req.Object = runtime.RawExtension{Raw: []byte(tc.object)}
			got := admitReview(context.Background(), a, req)
			if got.Allowed || got.Rule != RuleMalformed || !strings.Contains(got.Message, tc.want) {
				t.Fatalf("got allowed=%v %s: %q; want refused as malformed, naming %q", got.Allowed, got.Rule, got.Message, tc.want)
			}
		})
	}
	// The status subresource cannot change the selector.
	req := rolloutReq(t, reviewtest.AdminUser, admissionv1.Update, mkRollout(matchLabels("pool", "blue")), mkRollout(matchLabels(contract.PoolLabel, "blue")))
	req.SubResource = "status"
	if got := admitReview(context.Background(), a, req); !got.Allowed {
		t.Errorf("a status write was judged: %s", got.Message)
	}
}
