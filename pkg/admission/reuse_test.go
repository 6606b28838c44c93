package admission

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/policy"
)

// TestReviewFuncKeepsNothingOfTheBody: cmd/webhook reads /validate's
// bodies into recycled buffers (server.ReuseBodies), so nothing the review
// function leaves behind may view one: the metrics' label values, the
// policies' remembered verdicts. Each review here gets its own copy of the
// body, overwritten as soon as it is answered.
func TestReviewFuncKeepsNothingOfTheBody(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	policyMetrics, err := policy.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "test.rego"), []byte(testPolicies), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	engine, err := policy.New(ctx, policy.Options{Dir: dir, Graph: testGraph(), Metrics: policyMetrics})
	if err != nil {
		t.Fatal(err)
	}
	review := ReviewFunc(newAdmitter(t, config.Default()), metrics, WithPolicies(&Policies{Engine: engine, Graph: testGraph()}))
	edit := reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Create, plainCM("app", goodConfig), nil).build(t))
	status := reviewBody(t, "admission.k8s.io/v1", nodeReq(n1User, admissionv1.Update, "status", "n1", mkNode("n1"), mkNode("n1")).build(t))
	// An update's old object is remembered (storedConfigs) from its second
	// sighting on, and read from the memo on the third.
	const ninetyPods = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 90\n"
	update := reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Update, eligibleCM("pool", ninetyPods), eligibleCM("pool", fewPods)).build(t))
	for i := range 3 {
		for _, body := range [][]byte{edit, status, update} {
			buf := bytes.Clone(body)
			resp, err := review(context.Background(), buf)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.(*admissionv1.AdmissionReview).Response
			if bytes.Equal(body, status) == r.Allowed {
				t.Fatalf("review %d: %+v", i, r)
			}
			if bytes.Equal(body, update) && !slices.Contains(r.Warnings, "nodeguard policy nodeguard.admission/pods_changed: maxPods goes from 60 to 90") {
				t.Fatalf("review %d of the update: warnings %q, want the old configuration's maxPods", i, r.Warnings)
			}
			// As the pool would: the buffer is another request's now.
			for j := range buf {
				buf[j] = 'X'
			}
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			var labels []string
			for _, label := range m.GetLabel() {
				labels = append(labels, label.GetName()+"="+label.GetValue())
			}
			counts[family.GetName()+"{"+strings.Join(labels, ",")+"}"] += m.GetCounter().GetValue()
		}
	}
	// Each third review matched the verdict remembered at the second: the
	// memo compared against its own copy of the input, not a view.
	for series, want := range map[string]float64{
		"nodeguard_admission_decisions_total{outcome=allowed,resource=configmaps,rule=}":                             6,
		"nodeguard_admission_decisions_total{outcome=refused,resource=nodes,rule=policy nodeguard.admission/status}": 3,
		"nodeguard_policy_evaluations_total{outcome=remembered,package=" + policy.PackageAdmission + "}":             3,
	} {
		if counts[series] != want {
			t.Errorf("%s = %v, want %v; all series: %v", series, counts[series], want, counts)
		}
	}
}
