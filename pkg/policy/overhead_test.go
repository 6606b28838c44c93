package policy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// BenchmarkPolicyOverhead measures what the shipped policies add to the
// in-process decision time of each endpoint, the target being at
// most 50%: each iteration hands one review to the endpoint (server.Authorize,
// server.Validate)
// (decoding, built-in rules, encoding: what cmd/webhook runs per request)
// without policies and then with them, as cmd/webhook wires them, and
// times both. Interleaving the two, request by request, cancels the drift
// of a shared machine that separate benchmarks would mix into the ratio.
//
// ns/op is the pair in wall time; "without-ns" and "with-ns" are the
// halves in the thread's CPU time (wall time where there is no such clock),
// and "overhead-%" is (with - without) / without.
func BenchmarkPolicyOverhead(b *testing.B) {
	g := benchGraph()
	engine := benchEngine(b, g)
	authorizer := authz.New(g, nil)
	authzWithout := reviewOf(server.Authorize(authorizer, nil, 1<<20))
	authzWith := reviewOf(server.Authorize(authorizer, &policy.AuthzPolicies{Engine: engine, Graph: g, FailurePolicy: policy.AuthzFailurePolicy}, 1<<20))

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	cmReq, cm := configMapUpdate(b)
	if err := indexer.Add(cm); err != nil {
		b.Fatal(err)
	}
	s := settings.Default()
	admitter := admission.New(func() *settings.Settings { return s }, corelisters.NewConfigMapLister(indexer), g)
	admitWithout := reviewOf(server.Validate(admitter, nil, 8<<20))
	admitWith := reviewOf(server.Validate(admitter, &policy.AdmissionPolicies{Engine: engine, Graph: g, FailurePolicy: policy.AdmissionFailurePolicy}, 8<<20))

	nodeGroups := []string{"system:nodes", "system:authenticated"}
	sar := func(attrs authorizationv1.ResourceAttributes) []byte {
		return mustJSON(b, &authorizationv1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
			Spec:     authorizationv1.SubjectAccessReviewSpec{User: "system:node:node-1", Groups: nodeGroups, ResourceAttributes: &attrs},
		})
	}
	statusUpdate := nodeStatusUpdate(b)
	statusUpdate.UserInfo = authenticationv1.UserInfo{Username: "system:node:node-1", Groups: nodeGroups}
	// An administrator's update of an eligible ConfigMap in an allowed
	// namespace, changing one field. The configuration sets fields
	// dangerous_fields refuses unless allowed: the annotation allows them,
	// so that the policy still evaluates every finding and only warns.
	cmReq.Namespace = "kubelet-configs"
	cmReq.UserInfo = authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}
	cmObj := cm.DeepCopy()
	cmObj.Namespace = "kubelet-configs"
	cmObj.Annotations = map[string]string{"nodeguard.dev/allow-dangerous-fields": "true"}
	cmReq.Object = kruntime.RawExtension{Raw: mustJSON(b, cmObj)}
	cmObj.Data["kubelet"] += "\nmaxPods: 120\n"
	cmReq.OldObject = kruntime.RawExtension{Raw: mustJSON(b, cmObj)}
	if err := indexer.Add(cmObj); err != nil {
		b.Fatal(err)
	}

	type reviewFunc = func(context.Context, []byte) (any, error)
	for _, bc := range []struct {
		name          string
		without, with reviewFunc
		body          []byte
		check         func(any) bool
	}{
		{"authorize/node-watches-assigned-configmap", authzWithout, authzWith,
			sar(authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "watch", Version: "v1", Resource: "configmaps", Name: "kubelet-gpu"}),
			sarAllowed},
		{"authorize/node-updates-lease", authzWithout, authzWith,
			sar(authorizationv1.ResourceAttributes{Namespace: "kube-node-lease", Verb: "update", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Name: "node-1"}),
			func(any) bool { return true }},
		{"validate/node-status-update", admitWithout, admitWith, reviewBody(b, statusUpdate), reviewAllowed},
		{"validate/configmap-update", admitWithout, admitWith, reviewBody(b, cmReq), reviewAllowed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for _, review := range []reviewFunc{bc.without, bc.with} {
				resp, err := review(context.Background(), bc.body)
				if err != nil || !bc.check(resp) {
					b.Fatalf("unexpected answer %v: %s", err, jsonOf(resp))
				}
			}
			// The clock is the thread's CPU time where the system has one:
			// on a shared machine, wall time counts the waits for a CPU,
			// which have nothing to do with either half.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var without, with time.Duration
			b.ReportAllocs()
			// The order alternates, so that neither half always runs just
			// after the other (warm caches, or the other's garbage).
			withFirst := false
			for b.Loop() {
				first, second := bc.without, bc.with
				if withFirst {
					first, second = second, first
				}
				start := threadCPUTime()
				_, _ = first(context.Background(), bc.body)
				mid := threadCPUTime()
				_, _ = second(context.Background(), bc.body)
				end := threadCPUTime()
				if withFirst {
					with, without = with+mid-start, without+end-mid
				} else {
					without, with = without+mid-start, with+end-mid
				}
				withFirst = !withFirst
			}
			n := float64(b.N)
			b.ReportMetric(float64(without.Nanoseconds())/n, "without-ns")
			b.ReportMetric(float64(with.Nanoseconds())/n, "with-ns")
			b.ReportMetric(100*float64(with-without)/float64(without), "overhead-%")
		})
	}
}

// reviewOf calls the review endpoint h as the apiserver would; its answer
// is JSON (json.RawMessage).
func reviewOf(h http.Handler) func(context.Context, []byte) (any, error) {
	return func(ctx context.Context, body []byte) (any, error) { return reviewtest.Serve(ctx, h, body) }
}

func jsonOf(v any) string {
	if raw, ok := v.(json.RawMessage); ok {
		return string(raw)
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func sarAllowed(resp any) bool {
	var sar authorizationv1.SubjectAccessReview
	return json.Unmarshal([]byte(jsonOf(resp)), &sar) == nil && sar.Status.Allowed
}

func reviewAllowed(resp any) bool {
	var review admissionv1.AdmissionReview
	return json.Unmarshal([]byte(jsonOf(resp)), &review) == nil && review.Response != nil && review.Response.Allowed
}
