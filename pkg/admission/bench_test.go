package admission

import (
	"context"
	"os"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// BenchmarkConfigMapUpdate is an update of an eligible ConfigMap holding a
// 4 KiB configuration, decided by the built-in rules with a forbidden field
// set (so that the old object's configuration is read too): with the
// checker's outcomes remembered, as a re-apply finds them, and with every
// configuration decoded anew. The difference is what keeps the cache in
// kubeletconfig.Checker.
func BenchmarkConfigMapUpdate(b *testing.B) {
	t := &testing.T{}
	data, err := os.ReadFile("../kubeletconfig/testdata/kubelet-4k.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cm := eligibleCM("x", string(data))
	old := eligibleCM("x", string(data))
	body := reviewBody(t, "admission.k8s.io/v1", cmReq(adminUser, admissionv1.Update, cm, old).build(t))
	settings := config.Default()
	settings.ForbiddenDynamicFields = []string{"staticPodPath"}
	a := newAdmitter(t, settings)
	review := ReviewFunc(a, nil)
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := review(context.Background(), body)
			if err != nil || !resp.(*admissionv1.AdmissionReview).Response.Allowed {
				b.Fatal(err, resp)
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.configs = kubeletconfig.NewChecker(1)
			resp, err := review(context.Background(), body)
			if err != nil || !resp.(*admissionv1.AdmissionReview).Response.Allowed {
				b.Fatal(err)
			}
		}
	})
}
