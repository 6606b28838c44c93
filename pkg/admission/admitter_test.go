package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

const (
	goodConfig       = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	newGateConfig    = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  APIServerWebhookAuthenticationToken: true\n"
	noSuchGateConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  NoSuchGate: true\n"
	lockedConfig     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  CPUManagerPolicyOptions: false\n"
	unknownField     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 110\n"
	invalidValue     = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 150\n"
	staticPodsSet    = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n"
	staticPodsMore   = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\nmaxPods: 50\n"
	staticPodsMove   = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /srv/manifests\n"
)

// fakeGraph stands in for the graph: assignments and kubelet versions.
type fakeGraph struct {
	assigned map[string][]string
	versions map[string]string
}

func (f fakeGraph) NodesAssignedTo(namespace, name string) []string {
	return f.assigned[namespace+"/"+name]
}

func (f fakeGraph) Node(name string) (*graph.NodeInfo, bool) {
	v, ok := f.versions[name]
	if !ok {
		return nil, false
	}
	info := &graph.NodeInfo{Name: name, KubeletVersion: v}
	info.ParsedKubeletVersion, _ = version.ParseGeneric(v)
	return info, true
}

func eligibleCM(name, content string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cfg", Name: name, Labels: map[string]string{contract.EligibleLabel: "true"}},
		Data:       map[string]string{contract.ConfigMapKey: content},
	}
}

func plainCM(name, content string) *corev1.ConfigMap {
	cm := eligibleCM(name, content)
	cm.Labels = nil
	return cm
}

func newAdmitter(t *testing.T, settings *config.Settings) *Admitter {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	immutable := true
	mutable := eligibleCM("mutable", goodConfig)
	for _, cm := range []*corev1.ConfigMap{eligibleCM("good", goodConfig), eligibleCM("newgate", newGateConfig),
		eligibleCM("locked", lockedConfig), eligibleCM("broken", unknownField), eligibleCM("nosuchgate", noSuchGateConfig), plainCM("plain", goodConfig), mutable} {
		// Configurations are immutable, as they should be, but one.
		if cm != mutable {
			cm.Immutable = &immutable
		}
		if err := indexer.Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	g := fakeGraph{
		assigned: map[string][]string{"cfg/good": {"n1", "n2", "unknown-version"}, "cfg/staticpods": {"n1"}},
		versions: map[string]string{"n1": "v1.37.2", "n2": "v1.35.1", "unknown-version": "garbage"},
	}
	return New(func() *config.Settings { return settings }, corelisters.NewConfigMapLister(indexer), g)
}

type nodeOpt func(*corev1.Node)

func mkNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withLabel(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }
func withoutLabel(k string) nodeOpt { return func(n *corev1.Node) { delete(n.Labels, k) } }
func withKubelet(v string) nodeOpt {
	return func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v }
}
func withAssignment(v string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[contract.ConfigSourceAnnotation] = v
	}
}
func withAnnotation(key, value string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	}
}

func withTaint(key string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}
func withOwner(name string) nodeOpt {
	return func(n *corev1.Node) {
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: "u"}}
	}
}
func withLegacySource(name string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "cfg", Name: name, KubeletConfigKey: "kubelet"}}
	}
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

var (
	n1User    = authenticationv1.UserInfo{Username: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	nameless  = authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:nodes"}}
	fakeNode  = authenticationv1.UserInfo{Username: "system:node:n2", Groups: []string{"system:authenticated"}}
	adminUser = authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}
	exempt    = authenticationv1.UserInfo{Username: "break-glass"}
)

type request struct {
	user        authenticationv1.UserInfo
	op          admissionv1.Operation
	resource    string
	subresource string
	name        string
	object, old any
}

func (r request) build(t *testing.T) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", UserInfo: r.user, Operation: r.op, Name: r.name, SubResource: r.subresource,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: r.resource},
		Object:   raw(t, r.object), OldObject: raw(t, r.old),
	}
	if r.resource == "configmaps" {
		req.Namespace = "cfg"
	}
	return req
}

func nodeReq(user authenticationv1.UserInfo, op admissionv1.Operation, sub, name string, object, old *corev1.Node) request {
	r := request{user: user, op: op, resource: "nodes", subresource: sub, name: name}
	if object != nil {
		r.object = object
	}
	if old != nil {
		r.old = old
	}
	return r
}

func cmReq(user authenticationv1.UserInfo, op admissionv1.Operation, object, old *corev1.ConfigMap) request {
	r := request{user: user, op: op, resource: "configmaps"}
	if object != nil {
		r.object, r.name = object, object.Name
	}
	if old != nil {
		r.old, r.name = old, old.Name
	}
	return r
}

func TestAdmit(t *testing.T) {
	const C, U, D = admissionv1.Create, admissionv1.Update, admissionv1.Delete
	base := config.Default()
	selfAssign := &config.Settings{AllowNodeSelfAssignment: true}
	minVersion := &config.Settings{MinKubeletVersion: version.MustParseGeneric("1.36.0")}
	forbidStatic := &config.Settings{ForbiddenDynamicFields: []string{"staticPodPath"}, ExemptUsers: []string{"break-glass"}}

	tests := []struct {
		name     string
		settings *config.Settings
		req      request
		wantRule contract.Rule // empty: allowed
		wantText string        // in the message when refused, in a warning when allowed
	}{
		// Rule 1: own Node only, on nodes and nodes/status, every operation.
		{"node creates itself", base, nodeReq(n1User, C, "", "", mkNode("n1"), nil), "", ""},
		{"node creates another node", base, nodeReq(n1User, C, "", "", mkNode("n2"), nil), contract.RuleOwnNode, `may not create Node "n2"`},
		{"node updates itself", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel("example.com/a", "b")), mkNode("n1")), "", ""},
		{"node updates its status", base, nodeReq(n1User, U, "status", "n1", mkNode("n1"), mkNode("n1")), "", ""},
		{"node updates another node", base, nodeReq(n1User, U, "", "n2", mkNode("n2"), mkNode("n2")), contract.RuleOwnNode, `may not update Node "n2"`},
		{"node updates another node's status", base, nodeReq(n1User, U, "status", "n2", mkNode("n2"), mkNode("n2")), contract.RuleOwnNode, `Node "n2"`},
		{"node deletes itself", base, nodeReq(n1User, D, "", "n1", nil, mkNode("n1")), "", ""},
		{"node deletes another node", base, nodeReq(n1User, D, "", "n2", nil, mkNode("n2")), contract.RuleOwnNode, `may not delete Node "n2"`},
		{"nameless system:nodes member writes a node", base, nodeReq(nameless, U, "", "n1", mkNode("n1"), mkNode("n1")), contract.RuleOwnNode, "does not name a node"},
		{"system:node user outside the group is not a node", base, nodeReq(fakeNode, U, "", "n1", mkNode("n1"), mkNode("n1")), "", ""},
		{"admin updates any node", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withTaint("x")), mkNode("n2")), "", ""},
		{"node proxy subresource is not judged", base, nodeReq(n1User, U, "proxy", "n2", mkNode("n2"), mkNode("n2")), "", ""},

		// Rule 2: labels, taints, ownerReferences, legacy configSource.
		{"node adds a node-restriction label", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel("node-restriction.kubernetes.io/pool", "a")), mkNode("n1")), contract.RuleNodeRestriction, "node-restriction.kubernetes.io/pool"},
		{"node registers with a node-restriction subdomain label", base, nodeReq(n1User, C, "", "", mkNode("n1", withLabel("x.node-restriction.kubernetes.io/y", "a")), nil), contract.RuleNodeRestriction, "x.node-restriction.kubernetes.io/y"},
		{"node keeps its node-restriction label", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withLabel("node-restriction.kubernetes.io/pool", "a")), mkNode("n1", withLabel("node-restriction.kubernetes.io/pool", "a"))), "", ""},
		{"node changes a node-restriction label", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel("node-restriction.kubernetes.io/pool", "b")), mkNode("n1", withLabel("node-restriction.kubernetes.io/pool", "a"))), contract.RuleNodeRestriction, "node-restriction.kubernetes.io/pool"},
		{"node removes a node-restriction label", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withLabel("node-restriction.kubernetes.io/pool", "a"))), contract.RuleNodeRestriction, "node-restriction.kubernetes.io/pool"},
		{"node sets a non-kubelet kubernetes.io label", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withLabel("node-role.kubernetes.io/control-plane", "")), mkNode("n1")), contract.RuleNodeRestriction, "node-role.kubernetes.io/control-plane"},
		{"node sets a non-kubelet k8s.io label", base, nodeReq(n1User, C, "", "", mkNode("n1", withLabel("example.k8s.io/x", "")), nil), contract.RuleNodeRestriction, "example.k8s.io/x"},
		{"node changes a kubelet label", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel("topology.kubernetes.io/zone", "b")), mkNode("n1", withLabel("topology.kubernetes.io/zone", "a"))), "", ""},
		{"node removes its hostname label", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withoutLabel("kubernetes.io/hostname")), mkNode("n1")), "", ""},
		{"node labels itself into a pool", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel(contract.PoolLabel, "blue")), mkNode("n1")), contract.RuleNodeRestriction, "nodeguard.dev/pool"},
		{"node registers in a pool", base, nodeReq(n1User, C, "", "", mkNode("n1", withLabel(contract.PoolLabel, "blue")), nil), contract.RuleNodeRestriction, "reserved to the control plane and the administrator (node-restriction.kubernetes.io, nodeguard.dev"},
		{"node moves itself to another pool", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withLabel(contract.PoolLabel, "gpu")), mkNode("n1", withLabel(contract.PoolLabel, "blue"))), contract.RuleNodeRestriction, "nodeguard.dev/pool"},
		{"node leaves its pool", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withLabel(contract.PoolLabel, "blue"))), contract.RuleNodeRestriction, "nodeguard.dev/pool"},
		{"node sets a nodeguard.dev subdomain label", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel("team.nodeguard.dev/pool", "a")), mkNode("n1")), contract.RuleNodeRestriction, "team.nodeguard.dev/pool"},
		{"node keeps the pool an admin gave it", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withLabel(contract.PoolLabel, "blue")), mkNode("n1", withLabel(contract.PoolLabel, "blue"))), "", ""},
		{"admin puts a node in a pool", base, nodeReq(adminUser, U, "", "n1", mkNode("n1", withLabel(contract.PoolLabel, "blue")), mkNode("n1")), "", ""},
		{"node changes an unrelated label", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLabel("example.com/x", "y")), mkNode("n1")), "", ""},
		{"node registers with taints", base, nodeReq(n1User, C, "", "", mkNode("n1", withTaint("x")), nil), "", ""},
		{"node changes its taints", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withTaint("x"))), contract.RuleNodeRestriction, "taints"},
		{"node sets ownerReferences", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withOwner("p")), mkNode("n1")), contract.RuleNodeRestriction, "ownerReferences"},
		{"node registers with ownerReferences", base, nodeReq(n1User, C, "", "", mkNode("n1", withOwner("p")), nil), contract.RuleNodeRestriction, "ownerReferences"},
		{"node sets spec.configSource", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withLegacySource("good")), mkNode("n1")), contract.RuleNodeRestriction, "spec.configSource"},
		{"node clears spec.configSource", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withLegacySource("good"))), "", ""},
		{"node registers with spec.configSource", base, nodeReq(n1User, C, "", "", mkNode("n1", withLegacySource("good")), nil), contract.RuleNodeRestriction, "spec.configSource"},

		// Rule 3: self-assignment.
		{"node assigns itself, self-assignment off", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("cfg/good")), mkNode("n1")), contract.RuleConfigSource, "allowNodeSelfAssignment"},
		{"node assigns itself at registration, self-assignment off", base, nodeReq(n1User, C, "", "", mkNode("n1", withAssignment("cfg/good")), nil), contract.RuleConfigSource, "allowNodeSelfAssignment"},
		{"node assigns itself an eligible ConfigMap, self-assignment on", selfAssign, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("cfg/good")), mkNode("n1")), "", ""},
		{"node assigns itself a non-eligible ConfigMap", selfAssign, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("cfg/plain")), mkNode("n1")), contract.RuleConfigSource, "cfg/plain does not exist or lacks the label"},
		{"node assigns itself a missing ConfigMap", selfAssign, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("cfg/missing")), mkNode("n1")), contract.RuleConfigSource, "cfg/missing"},
		{"node assigns itself a malformed reference", selfAssign, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("good")), mkNode("n1")), contract.RuleConfigSource, "want <namespace>/<name>"},
		{"node clears its assignment", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withAssignment("cfg/good"))), "", ""},
		{"node empties its assignment", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("")), mkNode("n1", withAssignment("cfg/good"))), "", ""},
		{"node keeps an assignment an admin made", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withAssignment("cfg/good")), mkNode("n1", withAssignment("cfg/good"))), "", ""},
		{"node forges its previous config source", selfAssign, nodeReq(n1User, U, "", "n1", mkNode("n1", withAnnotation(v1alpha1.PreviousConfigSourceAnnotation, "cfg/good")), mkNode("n1")), contract.RuleConfigSource, v1alpha1.PreviousConfigSourceAnnotation},
		{"node empties its previous config source", base, nodeReq(n1User, U, "", "n1", mkNode("n1", withAnnotation(v1alpha1.PreviousConfigSourceAnnotation, "")), mkNode("n1")), contract.RuleConfigSource, v1alpha1.PreviousConfigSourceAnnotation},
		{"node removes its previous config source", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withAnnotation(v1alpha1.PreviousConfigSourceAnnotation, "cfg/good"))), contract.RuleConfigSource, v1alpha1.PreviousConfigSourceAnnotation},
		{"node claims a rollout", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withAnnotation(v1alpha1.RolloutAnnotation, "pool")), mkNode("n1")), contract.RuleConfigSource, v1alpha1.RolloutAnnotation},
		{"node registers with rollout bookkeeping", base, nodeReq(n1User, C, "", "", mkNode("n1", withAnnotation(v1alpha1.RolloutAnnotation, "pool")), nil), contract.RuleConfigSource, v1alpha1.RolloutAnnotation},
		{"node keeps the bookkeeping a rollout made", base, nodeReq(n1User, U, "status", "n1",
			mkNode("n1", withAssignment("cfg/good"), withAnnotation(v1alpha1.RolloutAnnotation, "pool"), withAnnotation(v1alpha1.PreviousConfigSourceAnnotation, "")),
			mkNode("n1", withAssignment("cfg/good"), withAnnotation(v1alpha1.RolloutAnnotation, "pool"), withAnnotation(v1alpha1.PreviousConfigSourceAnnotation, ""))), "", ""},
		{"admin writes rollout bookkeeping", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAnnotation(v1alpha1.PreviousConfigSourceAnnotation, "cfg/good")), mkNode("n2")), "", ""},
		{"node chooses not to be drained", base, nodeReq(n1User, U, "status", "n1", mkNode("n1", withAnnotation(contract.DrainAnnotation, contract.DrainNever)), mkNode("n1")), contract.RuleConfigSource, contract.DrainAnnotation},
		{"node drops the drain mode a rollout set", base, nodeReq(n1User, U, "", "n1", mkNode("n1"), mkNode("n1", withAnnotation(contract.DrainAnnotation, contract.DrainAlways))), contract.RuleConfigSource, contract.DrainAnnotation},
		{"node keeps the drain mode a rollout set", base, nodeReq(n1User, U, "status", "n1",
			mkNode("n1", withAnnotation(contract.DrainAnnotation, contract.DrainAlways)), mkNode("n1", withAnnotation(contract.DrainAnnotation, contract.DrainAlways))), "", ""},
		{"admin sets a Node's drain mode", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAnnotation(contract.DrainAnnotation, contract.DrainNever)), mkNode("n2")), "", ""},

		// Rule 4: minimum kubelet version at registration.
		{"old kubelet registers", minVersion, nodeReq(n1User, C, "", "", mkNode("n1", withKubelet("v1.35.9")), nil), contract.RuleMinKubeletVersion, "below the minimum 1.36.0"},
		{"new enough kubelet registers", minVersion, nodeReq(n1User, C, "", "", mkNode("n1", withKubelet("v1.36.0-rc.1")), nil), "", ""},
		{"kubelet without version registers", minVersion, nodeReq(n1User, C, "", "", mkNode("n1", withKubelet("")), nil), contract.RuleMinKubeletVersion, "reports no kubelet version"},
		{"kubelet with garbage version registers", minVersion, nodeReq(n1User, C, "", "", mkNode("n1", withKubelet("latest")), nil), contract.RuleMinKubeletVersion, "unparseable"},
		{"old kubelet still reports status", minVersion, nodeReq(n1User, U, "status", "n1", mkNode("n1", withKubelet("v1.35.9")), mkNode("n1", withKubelet("v1.35.9"))), "", ""},

		// Rule 5: assignments by anyone.
		{"admin assigns a good config", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/good")), mkNode("n2")), "", ""},
		{"admin assigns a gate the kubelet does not know", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withKubelet("v1.35.1"), withAssignment("cfg/newgate")), mkNode("n2", withKubelet("v1.35.1"))), contract.RuleFeatureGates, "APIServerWebhookAuthenticationToken"},
		{"admin assigns the same gate to a kubelet that knows it", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/newgate")), mkNode("n2")), "", ""},
		{"admin flips a locked gate", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/locked")), mkNode("n2")), contract.RuleFeatureGates, "CPUManagerPolicyOptions"},
		{"admin assigns at creation", base, nodeReq(adminUser, C, "", "", mkNode("n2", withKubelet("v1.35.1"), withAssignment("cfg/newgate")), nil), contract.RuleFeatureGates, "APIServerWebhookAuthenticationToken"},
		{"legacy assignment is judged too", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/locked")), mkNode("n2", withAssignment("cfg/good"))), contract.RuleFeatureGates, "locked"},
		{"admin assigns a config that does not decode", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/broken")), mkNode("n2")), contract.RuleConfigContent, "maxPodz"},
		{"admin assigns a mutable ConfigMap", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/mutable")), mkNode("n2")), "",
			"ConfigMap cfg/mutable is mutable: once node n2 has it open, its edits keep reaching the node after the assignment or the label is removed"},
		{"admin assigns a non-eligible ConfigMap", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withAssignment("cfg/plain")), mkNode("n2")), "", "not an eligible kubelet configuration"},
		{"admin assigns to a node without a version", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withKubelet(""), withAssignment("cfg/newgate")), mkNode("n2", withKubelet(""))), "", "judged against every kubelet nodeguard knows (1.34 to 1.37), not its own"},
		{"admin assigns a gate no kubelet knows to a node without a parseable version", base, nodeReq(adminUser, U, "", "n2", mkNode("n2", withKubelet("garbage"), withAssignment("cfg/nosuchgate")), mkNode("n2", withKubelet("garbage"))),
			contract.RuleFeatureGates, `reports no parseable kubelet version ("garbage"), and no kubelet nodeguard knows (1.34 to 1.37) can run it`},
		{"unchanged assignment is not re-judged", base, nodeReq(adminUser, U, "status", "n2", mkNode("n2", withKubelet("v1.35.1"), withAssignment("cfg/newgate")), mkNode("n2", withKubelet("v1.35.1"), withAssignment("cfg/newgate"))), "", ""},
		{"exempt user skips rule 5", forbidStatic, nodeReq(exempt, U, "", "n2", mkNode("n2", withAssignment("cfg/locked")), mkNode("n2")), "", ""},
		{"node assigning itself is judged by rule 5 too", selfAssign, nodeReq(n1User, U, "", "n1", mkNode("n1", withAssignment("cfg/locked")), mkNode("n1")), contract.RuleFeatureGates, "locked"},

		// Rule 6: eligible ConfigMap content.
		{"create a valid config", base, cmReq(adminUser, C, eligibleCM("new", goodConfig), nil), "", ""},
		{"create with an unknown field", base, cmReq(adminUser, C, eligibleCM("new", unknownField), nil), contract.RuleConfigContent, `unknown field "maxPodz"`},
		{"create with an invalid value", base, cmReq(adminUser, C, eligibleCM("new", invalidValue), nil), contract.RuleConfigContent, "imageGCHighThresholdPercent"},
		{"create with the wrong kind", base, cmReq(adminUser, C, eligibleCM("new", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n"), nil), contract.RuleConfigContent, "kind"},
		{"create without the kubelet key", base, cmReq(adminUser, C, &corev1.ConfigMap{ObjectMeta: eligibleCM("new", "").ObjectMeta}, nil), contract.RuleConfigContent, "data[kubelet]"},
		{"create with the config under binaryData", base, cmReq(adminUser, C, &corev1.ConfigMap{ObjectMeta: eligibleCM("new", "").ObjectMeta,
			BinaryData: map[string][]byte{contract.ConfigMapKey: []byte(goodConfig)}}, nil), contract.RuleConfigContent, "is under binaryData"},
		{"create with an empty config", base, cmReq(adminUser, C, eligibleCM("new", ""), nil), contract.RuleConfigContent, "empty"},
		{"create a non-eligible ConfigMap with garbage", base, cmReq(adminUser, C, plainCM("new", "garbage"), nil), "", ""},
		{"label an invalid ConfigMap", base, cmReq(adminUser, U, eligibleCM("x", unknownField), plainCM("x", unknownField)), contract.RuleConfigContent, "maxPodz"},
		{"unlabel an invalid ConfigMap", base, cmReq(adminUser, U, plainCM("x", unknownField), eligibleCM("x", goodConfig)), "", ""},
		{"create with a forbidden field", forbidStatic, cmReq(adminUser, C, eligibleCM("staticpods", staticPodsSet), nil), contract.RuleConfigContent, "staticPodPath"},
		{"change a forbidden field", forbidStatic, cmReq(adminUser, U, eligibleCM("staticpods", staticPodsMove), eligibleCM("staticpods", staticPodsSet)), contract.RuleConfigContent, "staticPodPath"},
		{"change another field beside a forbidden one", forbidStatic, cmReq(adminUser, U, eligibleCM("staticpods", staticPodsMore), eligibleCM("staticpods", staticPodsSet)), "", ""},
		{"exempt user sets a forbidden field", forbidStatic, cmReq(exempt, C, eligibleCM("staticpods", staticPodsSet), nil), "", ""},
		{"nodes are never exempt", &config.Settings{ExemptUsers: []string{"system:node:n1"}}, cmReq(n1User, C, eligibleCM("new", unknownField), nil), contract.RuleConfigContent, "maxPodz"},
		{"edit breaks an assigned node", base, cmReq(adminUser, U, eligibleCM("good", newGateConfig), eligibleCM("good", goodConfig)), contract.RuleFeatureGates, "n2 (kubelet v1.35.1)"},
		{"edit fine for all assigned nodes warns about unknown versions", base, cmReq(adminUser, U, eligibleCM("good", goodConfig+"maxOpenFiles: 1000\n"), eligibleCM("good", goodConfig)), "", "unknown-version (reports no parseable kubelet version \"garbage\")"},
		{"delete an assigned ConfigMap warns", base, cmReq(adminUser, D, nil, eligibleCM("good", goodConfig)), "", "assigned to n1, n2, unknown-version"},
		{"delete an unassigned ConfigMap", base, cmReq(adminUser, D, nil, eligibleCM("other", goodConfig)), "", ""},

		// Malformed requests.
		{"update without the old Node", base, nodeReq(adminUser, U, "", "n1", mkNode("n1"), nil), RuleMalformed, "without the old object"},
		{"update without the old ConfigMap", base, cmReq(adminUser, U, eligibleCM("good", goodConfig), nil), RuleMalformed, "without the old object"},
		{"create without an object", base, nodeReq(n1User, C, "", "n1", nil, nil), RuleMalformed, "without the object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newAdmitter(t, tt.settings).Admit(context.Background(), tt.req.build(t))
			if tt.wantRule == "" {
				if !got.Allowed {
					t.Fatalf("refused: %s: %s", got.Rule, got.Message)
				}
				if tt.wantText != "" && !strings.Contains(strings.Join(got.Warnings, "\n"), tt.wantText) {
					t.Fatalf("warnings %q do not mention %q", got.Warnings, tt.wantText)
				}
				if tt.wantText == "" && len(got.Warnings) > 0 {
					t.Fatalf("unexpected warnings %q", got.Warnings)
				}
				return
			}
			if got.Allowed || got.Rule != tt.wantRule || !strings.Contains(got.Message, tt.wantText) {
				t.Fatalf("got allowed=%v %s: %q; want %s mentioning %q", got.Allowed, got.Rule, got.Message, tt.wantRule, tt.wantText)
			}
		})
	}
}

func TestMalformedObjects(t *testing.T) {
	a := newAdmitter(t, config.Default())
	for _, req := range []*admissionv1.AdmissionRequest{
		{UID: "u", Operation: admissionv1.Update, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n1", UserInfo: n1User,
			Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":1}}`)}, OldObject: runtime.RawExtension{Raw: []byte(`{}`)}},
		{UID: "u", Operation: admissionv1.Create, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, UserInfo: adminUser,
			Object: runtime.RawExtension{Raw: []byte(`[]`)}},
		// Labels are decoded only when they changed, and then strictly.
		{UID: "u", Operation: admissionv1.Update, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n1", UserInfo: n1User,
			Object:    runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"n1","labels":{"a":1}}}`)},
			OldObject: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"n1","labels":{"a":"1"}}}`)}},
		{UID: "u", Operation: admissionv1.Create, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, UserInfo: n1User,
			Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"n1","labels":"a"}}`)}},
	} {
		if got := a.Admit(context.Background(), req); got.Allowed || got.Rule != RuleMalformed {
			t.Errorf("Admit(%s) = %+v, want refused as malformed", req.Object.Raw, got)
		}
	}
}

var version137 = version.MustParseGeneric("1.37.0")

func corev1Image(i int) corev1.ContainerImage {
	return corev1.ContainerImage{Names: []string{"registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "registry.example.com/team/app:v" + strings.Repeat("1", i%5+1)}, SizeBytes: int64(1000000 + i)}
}

func TestLongErrorListsAreSummarised(t *testing.T) {
	content := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n"
	for i := 0; i < 50; i++ {
		content += "  bogus" + strings.Repeat("x", i) + ": 1Gi\n"
	}
	r := newAdmitter(t, config.Default()).Admit(context.Background(), cmReq(adminUser, admissionv1.Create, eligibleCM("many", content), nil).build(t))
	if r.Allowed || !strings.Contains(r.Message, "and 45 more errors") || len(r.Message) > 2000 {
		t.Fatalf("message (%d bytes): %s", len(r.Message), r.Message)
	}
}
