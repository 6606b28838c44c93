package noderestrictiondiff

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/authentication/install"
	_ "k8s.io/kubernetes/pkg/apis/certificates/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	_ "k8s.io/kubernetes/pkg/features" // registers the kube feature gates, at their v1.37 defaults
	"k8s.io/kubernetes/plugin/pkg/admission/noderestriction"
)

// oracle is the in-tree NodeRestriction plugin, set up as kube-apiserver
// sets it up: the default feature gates, informer listers holding the
// world, and an authorizer answering granted.
type oracle struct {
	plugin *noderestriction.Plugin
}

type grantedAuthorizer struct{}

func (grantedAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if granted(a.GetUser().GetName(), a.GetVerb(), a.GetResource()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func newOracle(w *world) (*oracle, error) {
	plugin := noderestriction.NewPlugin(nodeidentifier.NewDefaultNodeIdentifier())
	plugin.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	plugin.SetExternalKubeInformerFactory(factory)
	plugin.SetUnconditionalAuthorizer(grantedAuthorizer{})
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("NodeRestriction: %w", err)
	}
	for _, obj := range w.objects {
		var err error
		switch o := obj.(type) {
		case *corev1.Node:
			err = factory.Core().V1().Nodes().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.ServiceAccount:
			err = factory.Core().V1().ServiceAccounts().Informer().GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			err = factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		case *corev1.PersistentVolume:
			err = factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(o)
		case *storagev1.CSIDriver:
			err = factory.Storage().V1().CSIDrivers().Informer().GetIndexer().Add(o)
		default:
			err = fmt.Errorf("the oracle has no lister for %T", obj)
		}
		if err != nil {
			return nil, err
		}
	}
	return &oracle{plugin: plugin}, nil
}

// internal converts a (defaulted) v1 object to the apiserver's internal
// type, as the plugin receives it; nil stays nil.
func internal(obj runtime.Object) (runtime.Object, error) {
	if obj == nil {
		return nil, nil
	}
	gvks, _, err := legacyscheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	out, err := legacyscheme.Scheme.ConvertToVersion(obj.DeepCopyObject(), schema.GroupVersion{Group: gvks[0].Group, Version: runtime.APIVersionInternal})
	if err != nil {
		return nil, fmt.Errorf("converting %s to the internal version: %w", gvks[0], err)
	}
	return out, nil
}

// admit is the plugin's decision: nil allows.
func (o *oracle) admit(ctx context.Context, wr *nodeWrite) error {
	object, err := internal(wr.object)
	if err != nil {
		return err
	}
	old, err := internal(wr.old)
	if err != nil {
		return err
	}
	u := &user.DefaultInfo{Name: wr.user.Username, Groups: wr.user.Groups}
	attrs := admission.NewAttributesRecord(object, old, wr.kind, wr.namespace, wr.name, wr.resource, wr.subresource,
		admission.Operation(wr.operation), nil, false, u)
	return o.plugin.Admit(ctx, attrs, admission.NewObjectInterfacesFromScheme(legacyscheme.Scheme))
}
