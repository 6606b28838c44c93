package admission

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// NewConfigMapInformer watches eligible ConfigMaps with their data, which
// the feature-gates rule decodes when an assignment is made. Only labelled ConfigMaps are
// ever held.
func NewConfigMapInformer(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	return coreinformers.NewFilteredConfigMapInformer(client, metav1.NamespaceAll, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{contract.EligibleLabel: contract.EligibleLabelValue}).String()
		})
}
