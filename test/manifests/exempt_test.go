package manifests

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/policy"
)

// TestExemptNamespacesMatchTheWebhook: the webhook refuses a policy
// configuration that allows kubelet configurations in a namespace its
// admission webhook never judges. It knows those namespaces only through
// --exempt-namespaces, whose default must be what the shipped
// namespaceSelector exempts, or the check guards the wrong namespaces.
func TestExemptNamespacesMatchTheWebhook(t *testing.T) {
	for _, name := range renderingNames {
		t.Run(name, func(t *testing.T) {
			var exempt []string
			err := eachWebhook(render(t, name), func(hook admissionregistrationv1.ValidatingWebhook) error {
				if hook.NamespaceSelector == nil {
					return nil
				}
				for _, expr := range hook.NamespaceSelector.MatchExpressions {
					if expr.Key == namespaceLabel && expr.Operator == metav1.LabelSelectorOpNotIn {
						exempt = append(exempt, expr.Values...)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(exempt)
			want := policy.DefaultExemptNamespaces()
			slices.Sort(want)
			if !slices.Equal(exempt, want) {
				t.Fatalf("the namespaceSelector exempts %v; --exempt-namespaces defaults to %v", exempt, want)
			}
		})
	}
}
