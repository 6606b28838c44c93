package reviewtest

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

// The kubelet configurations of the ConfigMaps in ConfigMapLister.
const (
	GoodConfig       = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	NewGateConfig    = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  APIServerWebhookAuthenticationToken: true\n"
	NoSuchGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  NoSuchGate: true\n"
	LockedConfig     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  CPUManagerPolicyOptions: false\n"
	UnknownField     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 110\n"
	// ReservedConfig holds back 1950m of cpu for the system.
	ReservedConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeReserved:\n  cpu: 1950m\n"
)

// FakeGraph stands in for the graph: assignments ("namespace/name" to the
// nodes assigned it) and kubelet versions (node to the version it reports).
type FakeGraph struct {
	Assigned map[string][]string
	Versions map[string]string
}

func (f FakeGraph) NodesAssignedTo(namespace, name string) []string {
	return f.Assigned[namespace+"/"+name]
}

func (f FakeGraph) Node(name string) (*graph.NodeInfo, bool) {
	v, ok := f.Versions[name]
	if !ok {
		return nil, false
	}
	info := &graph.NodeInfo{Name: name, KubeletVersion: v}
	info.ParsedKubeletVersion, _ = version.ParseGeneric(v)
	return info, true
}

// AdmitterGraph is the graph the tests' admitter decides with: cfg/good is
// assigned to n1 (kubelet v1.37.2), n2 (v1.35.1) and unknown-version
// (reporting "garbage"); cfg/staticpods to n1.
func AdmitterGraph() FakeGraph {
	return FakeGraph{
		Assigned: map[string][]string{"cfg/good": {"n1", "n2", "unknown-version"}, "cfg/staticpods": {"n1"}},
		Versions: map[string]string{"n1": "v1.37.2", "n2": "v1.35.1", "unknown-version": "garbage"},
	}
}

// EligibleConfigMap is cfg/name, labelled eligible, holding content under
// the kubelet key.
func EligibleConfigMap(name, content string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cfg", Name: name, Labels: map[string]string{contract.EligibleLabel: "true"}},
		Data:       map[string]string{contract.ConfigMapKey: content},
	}
}

// PlainConfigMap is EligibleConfigMap without the label.
func PlainConfigMap(name, content string) *corev1.ConfigMap {
	cm := EligibleConfigMap(name, content)
	cm.Labels = nil
	return cm
}

// ConfigMapLister lists the ConfigMaps the tests' admitter reads, all in
// cfg: good, newgate, locked, broken (UnknownField), nosuchgate and reserved, eligible
// and immutable; plain, with GoodConfig but not eligible; and mutable, with
// GoodConfig, eligible but not immutable.
func ConfigMapLister(t testing.TB) corelisters.ConfigMapLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	immutable := true
	mutable := EligibleConfigMap("mutable", GoodConfig)
	for _, cm := range []*corev1.ConfigMap{EligibleConfigMap("good", GoodConfig), EligibleConfigMap("newgate", NewGateConfig),
		EligibleConfigMap("locked", LockedConfig), EligibleConfigMap("broken", UnknownField), EligibleConfigMap("nosuchgate", NoSuchGateConfig),
		EligibleConfigMap("reserved", ReservedConfig), PlainConfigMap("plain", GoodConfig), mutable} {
		// Configurations are immutable, as they should be, but one.
		if cm != mutable {
			cm.Immutable = &immutable
		}
		if err := indexer.Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewConfigMapLister(indexer)
}

// ConfigMapRequest is a write of a ConfigMap, named as the ConfigMap; a nil
// object or old is absent.
func ConfigMapRequest(user authenticationv1.UserInfo, op admissionv1.Operation, object, old *corev1.ConfigMap) Request {
	r := Request{User: user, Operation: op, Resource: "configmaps"}
	if object != nil {
		r.Object, r.Name = object, object.Name
	}
	if old != nil {
		r.Old, r.Name = old, old.Name
	}
	return r
}
