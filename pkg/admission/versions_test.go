package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// A node that lowers its reported version, or reports one that does not
// parse, no longer decides rule 5 for a ConfigMap it shares: it cannot
// block an edit, and cannot get an edit through that no kubelet could run.
func TestRule5DoesNotTrustSelfReportedVersionsAgainstOthers(t *testing.T) {
	const (
		U = admissionv1.Update
	)
	base := settings.Default()
	edit := func(content string) reviewtest.Request {
		return reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", content), reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig))
	}
	for _, tt := range []struct {
		name string
		// seen are versions nodes reported before the graph's.
		seen     map[string]string
		req      reviewtest.Request
		wantRule contract.Rule
		wantText string
	}{
		{"a trusted older node blocks the edit", nil, edit(reviewtest.NewGateConfig), contract.RuleConfigContent, "n2 (kubelet v1.35.1)"},
		{"a node that lowered its version does not", map[string]string{"n2": "v1.37.2"}, edit(reviewtest.NewGateConfig), "",
			"not their own: n2 (reported kubelet v1.35.1 after 1.37.2), unknown-version (reports no parseable kubelet version \"garbage\")"},
		{"nor gets a gate no kubelet knows through", map[string]string{"n2": "v1.37.2", "n1": "v1.38.0"}, edit(reviewtest.NoSuchGateConfig), contract.RuleConfigContent,
			"not trusted (n1 (reported kubelet v1.37.2 after 1.38.0), n2 (reported kubelet v1.35.1 after 1.37.2), unknown-version (reports no parseable kubelet version \"garbage\")), and no kubelet nodeguard knows (1.34 to 1.37) can run it"},
		{"a node reporting a higher version is trusted", map[string]string{"n2": "v1.34.0"}, edit(reviewtest.NewGateConfig), contract.RuleConfigContent, "n2 (kubelet v1.35.1)"},
		{"its own assignment is judged by what it reports now", map[string]string{"n2": "v1.37.2"},
			reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate")), reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"))), contract.RuleFeatureGates, "APIServerWebhookAuthenticationToken"},
		{"and marked when allowed", map[string]string{"n2": "v1.37.2"},
			reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"))), "",
			"node n2 reported kubelet v1.35.1 after 1.37.2; this assignment was judged by the version it reports now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdmitter(t, base)
			for name, v := range tt.seen {
				a.KubeletVersions().Observe(reviewtest.Node(name, reviewtest.WithKubelet(v)))
			}
			got := admitReview(context.Background(), a, tt.req.Build(t))
			if tt.wantRule == "" {
				if !got.Allowed {
					t.Fatalf("refused: %s: %s", got.Rule, got.Message)
				}
				if w := strings.Join(got.Warnings, "\n"); !strings.Contains(w, tt.wantText) {
					t.Fatalf("warnings %q do not mention %q", w, tt.wantText)
				}
				return
			}
			if got.Allowed || got.Rule != tt.wantRule || !strings.Contains(got.Message, tt.wantText) {
				t.Fatalf("got allowed=%v %s: %s; want %s mentioning %q", got.Allowed, got.Rule, got.Message, tt.wantRule, tt.wantText)
			}
		})
	}
}

func TestKubeletVersionsRecord(t *testing.T) {
	k := NewKubeletVersions()
	now := time.Unix(1e9, 0)
	k.now = func() time.Time { return now }
	h := k.EventHandler()
	v := version.MustParseGeneric
	h.OnAdd(reviewtest.Node("n1", reviewtest.WithKubelet("v1.37.2")), false)
	h.OnUpdate(nil, reviewtest.Node("n1", reviewtest.WithKubelet("not a version")))
	if got := k.distrust("n1", "v1.37.2", v("v1.37.2")); got != "" {
		t.Errorf("same version distrusted: %s", got)
	}
	if got := k.distrust("n1", "v1.36.0", v("v1.36.0")); !strings.Contains(got, "reported kubelet v1.36.0 after 1.37.2") {
		t.Errorf("lowered version: %q", got)
	}
	if got := k.distrust("n1", "x", nil); !strings.Contains(got, `no parseable kubelet version "x"`) {
		t.Errorf("unparseable version: %q", got)
	}
	if got := k.distrust("n9", "v1.30.0", v("v1.30.0")); got != "" {
		t.Errorf("a node never seen is distrusted: %s", got)
	}

	// Deleting and registering again does not wash the record clean...
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "n1", Obj: reviewtest.Node("n1")})
	h.OnAdd(reviewtest.Node("n1", reviewtest.WithKubelet("v1.30.0")), false)
	if got := k.distrust("n1", "v1.30.0", v("v1.30.0")); got == "" {
		t.Error("re-registering with a lower version is trusted")
	}
	// ... until the Node has been gone for longer than forgetDeletedAfter.
	h.OnDelete(reviewtest.Node("n1"))
	now = now.Add(forgetDeletedAfter + time.Second)
	h.OnDelete(&corev1.Node{})
	if got := k.distrust("n1", "v1.30.0", v("v1.30.0")); got != "" {
		t.Errorf("record kept past forgetDeletedAfter: %s", got)
	}
	h.OnAdd("not a node", false)
	k.Observe(nil)
}
