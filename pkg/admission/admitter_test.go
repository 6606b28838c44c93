package admission

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/internal/reviewtest"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// The configurations only the admitter's own tests write.
const (
	invalidValue   = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 150\n"
	staticPodsSet  = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n"
	staticPodsMore = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\nmaxPods: 50\n"
	staticPodsMove = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /srv/manifests\n"
)

// newAdmitter is an Admitter with settings over the shared fixtures: the
// ConfigMaps of reviewtest.ConfigMapLister and reviewtest.AdmitterGraph.
func newAdmitter(t *testing.T, s *settings.Settings) *Admitter {
	t.Helper()
	return New(func() *settings.Settings { return s }, reviewtest.ConfigMapLister(t), reviewtest.AdmitterGraph())
}

func withoutLabel(k string) reviewtest.NodeOption {
	return func(n *corev1.Node) { delete(n.Labels, k) }
}
func withAnnotation(key, value string) reviewtest.NodeOption {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	}
}

func withCapacity(cpu, memory string) reviewtest.NodeOption {
	return func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	}
}

func withTaint(key string) reviewtest.NodeOption {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}
func withOwner(name string) reviewtest.NodeOption {
	return func(n *corev1.Node) {
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: "u"}}
	}
}
func withLegacySource(name string) reviewtest.NodeOption {
	return func(n *corev1.Node) {
		n.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "cfg", Name: name, KubeletConfigKey: "kubelet"}}
	}
}

// The identities only the admitter's own tests write as.
var (
	nameless = authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:nodes"}}
	fakeNode = authenticationv1.UserInfo{Username: "system:node:n2", Groups: []string{"system:authenticated"}}
)

func TestAdmit(t *testing.T) {
	const C, U, D = admissionv1.Create, admissionv1.Update, admissionv1.Delete
	base := settings.Default()
	selfAssign := &settings.Settings{AllowNodeSelfAssignment: true}
	minVersion := &settings.Settings{MinKubeletVersion: version.MustParseGeneric("1.36.0")}
	forbidStatic := &settings.Settings{ForbiddenDynamicFields: []string{"staticPodPath"}, ExemptUsers: []string{"break-glass"}}

	tests := []struct {
		name     string
		settings *settings.Settings
		req      reviewtest.Request
		wantRule contract.Rule // empty: allowed
		wantText string        // in the message when refused, in a warning when allowed
	}{
		// Rule 1: own Node only, on nodes and nodes/status, every operation.
		{"node creates itself", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1"), nil), "", ""},
		{"node creates another node", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n2"), nil), contract.RuleOwnNode, `may not create Node "n2"`},
		{"node updates itself", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel("example.com/a", "b")), reviewtest.Node("n1")), "", ""},
		{"node updates its status", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")), "", ""},
		{"node updates another node", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n2", reviewtest.Node("n2"), reviewtest.Node("n2")), contract.RuleOwnNode, `may not update Node "n2"`},
		{"node updates another node's status", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n2", reviewtest.Node("n2"), reviewtest.Node("n2")), contract.RuleOwnNode, `Node "n2"`},
		{"node deletes itself", base, reviewtest.NodeRequest(reviewtest.N1User, D, "", "n1", nil, reviewtest.Node("n1")), "", ""},
		{"node deletes another node", base, reviewtest.NodeRequest(reviewtest.N1User, D, "", "n2", nil, reviewtest.Node("n2")), contract.RuleOwnNode, `may not delete Node "n2"`},
		{"nameless system:nodes member writes a node", base, reviewtest.NodeRequest(nameless, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")), contract.RuleOwnNode, "does not name a node"},
		{"system:node user outside the group is not a node", base, reviewtest.NodeRequest(fakeNode, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1")), "", ""},
		{"admin updates any node", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", withTaint("x")), reviewtest.Node("n2")), "", ""},
		{"node proxy subresource is not judged", base, reviewtest.NodeRequest(reviewtest.N1User, U, "proxy", "n2", reviewtest.Node("n2"), reviewtest.Node("n2")), "", ""},

		// Rule 2: labels, taints, ownerReferences, legacy configSource.
		{"node adds a node-restriction label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel("node-restriction.kubernetes.io/pool", "a")), reviewtest.Node("n1")), contract.RuleNodeRestriction, "node-restriction.kubernetes.io/pool"},
		{"node registers with a node-restriction subdomain label", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithLabel("x.node-restriction.kubernetes.io/y", "a")), nil), contract.RuleNodeRestriction, "x.node-restriction.kubernetes.io/y"},
		{"node keeps its node-restriction label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", reviewtest.WithLabel("node-restriction.kubernetes.io/pool", "a")), reviewtest.Node("n1", reviewtest.WithLabel("node-restriction.kubernetes.io/pool", "a"))), "", ""},
		{"node changes a node-restriction label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel("node-restriction.kubernetes.io/pool", "b")), reviewtest.Node("n1", reviewtest.WithLabel("node-restriction.kubernetes.io/pool", "a"))), contract.RuleNodeRestriction, "node-restriction.kubernetes.io/pool"},
		{"node removes a node-restriction label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", reviewtest.WithLabel("node-restriction.kubernetes.io/pool", "a"))), contract.RuleNodeRestriction, "node-restriction.kubernetes.io/pool"},
		{"node sets a non-kubelet kubernetes.io label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", reviewtest.WithLabel("node-role.kubernetes.io/control-plane", "")), reviewtest.Node("n1")), contract.RuleNodeRestriction, "node-role.kubernetes.io/control-plane"},
		{"node sets a non-kubelet k8s.io label", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithLabel("example.k8s.io/x", "")), nil), contract.RuleNodeRestriction, "example.k8s.io/x"},
		{"node changes a kubelet label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel("topology.kubernetes.io/zone", "b")), reviewtest.Node("n1", reviewtest.WithLabel("topology.kubernetes.io/zone", "a"))), "", ""},
		{"node removes its hostname label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withoutLabel("kubernetes.io/hostname")), reviewtest.Node("n1")), "", ""},
		{"node labels itself into a pool", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue")), reviewtest.Node("n1")), contract.RuleNodeRestriction, "nodeguard.dev/pool"},
		{"node registers in a pool", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue")), nil), contract.RuleNodeRestriction, "reserved to the control plane and the administrator (node-restriction.kubernetes.io, nodeguard.dev"},
		{"node moves itself to another pool", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "gpu")), reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue"))), contract.RuleNodeRestriction, "nodeguard.dev/pool"},
		{"node leaves its pool", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue"))), contract.RuleNodeRestriction, "nodeguard.dev/pool"},
		{"node sets a nodeguard.dev subdomain label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel("team.nodeguard.dev/pool", "a")), reviewtest.Node("n1")), contract.RuleNodeRestriction, "team.nodeguard.dev/pool"},
		{"node keeps the pool an admin gave it", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue")), reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue"))), "", ""},
		{"admin puts a node in a pool", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel(contract.PoolLabel, "blue")), reviewtest.Node("n1")), "", ""},
		{"node changes an unrelated label", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithLabel("example.com/x", "y")), reviewtest.Node("n1")), "", ""},
		{"node registers with taints", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", withTaint("x")), nil), "", ""},
		{"node changes its taints", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", withTaint("x"))), contract.RuleNodeRestriction, "taints"},
		{"node sets ownerReferences", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withOwner("p")), reviewtest.Node("n1")), contract.RuleNodeRestriction, "ownerReferences"},
		{"node registers with ownerReferences", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", withOwner("p")), nil), contract.RuleNodeRestriction, "ownerReferences"},
		{"node sets spec.configSource", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withLegacySource("good")), reviewtest.Node("n1")), contract.RuleNodeRestriction, "spec.configSource"},
		{"node clears spec.configSource", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", withLegacySource("good"))), "", ""},
		{"node registers with spec.configSource", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", withLegacySource("good")), nil), contract.RuleNodeRestriction, "spec.configSource"},

		// Rule 3: self-assignment.
		{"node assigns itself, self-assignment off", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n1")), contract.RuleConfigSource, "allowNodeSelfAssignment"},
		{"node assigns itself at registration, self-assignment off", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good")), nil), contract.RuleConfigSource, "allowNodeSelfAssignment"},
		{"node assigns itself an eligible ConfigMap, self-assignment on", selfAssign, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n1")), "", ""},
		{"node assigns itself a non-eligible ConfigMap", selfAssign, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/plain")), reviewtest.Node("n1")), contract.RuleConfigSource, "cfg/plain does not exist or lacks the label"},
		{"node assigns itself a missing ConfigMap", selfAssign, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/missing")), reviewtest.Node("n1")), contract.RuleConfigSource, "cfg/missing"},
		{"node assigns itself a malformed reference", selfAssign, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("good")), reviewtest.Node("n1")), contract.RuleConfigSource, "want <namespace>/<name>"},
		{"node clears its assignment", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"))), "", ""},
		{"node empties its assignment", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("")), reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"))), "", ""},
		{"node keeps an assignment an admin made", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"))), "", ""},
		{"node forges its previous config source", selfAssign, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withAnnotation(contract.PreviousConfigSourceAnnotation, "cfg/good")), reviewtest.Node("n1")), contract.RuleConfigSource, contract.PreviousConfigSourceAnnotation},
		{"node empties its previous config source", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withAnnotation(contract.PreviousConfigSourceAnnotation, "")), reviewtest.Node("n1")), contract.RuleConfigSource, contract.PreviousConfigSourceAnnotation},
		{"node removes its previous config source", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", withAnnotation(contract.PreviousConfigSourceAnnotation, "cfg/good"))), contract.RuleConfigSource, contract.PreviousConfigSourceAnnotation},
		{"node claims a rollout", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", withAnnotation(contract.RolloutAnnotation, "pool")), reviewtest.Node("n1")), contract.RuleConfigSource, contract.RolloutAnnotation},
		{"node registers with rollout bookkeeping", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", withAnnotation(contract.RolloutAnnotation, "pool")), nil), contract.RuleConfigSource, contract.RolloutAnnotation},
		{"node keeps the bookkeeping a rollout made", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1",
			reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"), withAnnotation(contract.RolloutAnnotation, "pool"), withAnnotation(contract.PreviousConfigSourceAnnotation, "")),
			reviewtest.Node("n1", reviewtest.WithAssignment("cfg/good"), withAnnotation(contract.RolloutAnnotation, "pool"), withAnnotation(contract.PreviousConfigSourceAnnotation, ""))), "", ""},
		{"admin writes rollout bookkeeping", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", withAnnotation(contract.PreviousConfigSourceAnnotation, "cfg/good")), reviewtest.Node("n2")), "", ""},
		{"node chooses not to be drained", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", withAnnotation(contract.DrainAnnotation, contract.DrainNever)), reviewtest.Node("n1")), contract.RuleConfigSource, contract.DrainAnnotation},
		{"node drops the drain mode a rollout set", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", withAnnotation(contract.DrainAnnotation, contract.DrainAlways))), contract.RuleConfigSource, contract.DrainAnnotation},
		{"node keeps the drain mode a rollout set", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1",
			reviewtest.Node("n1", withAnnotation(contract.DrainAnnotation, contract.DrainAlways)), reviewtest.Node("n1", withAnnotation(contract.DrainAnnotation, contract.DrainAlways))), "", ""},
		{"admin sets a Node's drain mode", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", withAnnotation(contract.DrainAnnotation, contract.DrainNever)), reviewtest.Node("n2")), "", ""},
		{"node sets its own trial terms", base, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", withAnnotation(contract.TrialAnnotation, `{"allowShrink":true}`)), reviewtest.Node("n1")), contract.RuleConfigSource, contract.TrialAnnotation},
		{"node lets its drain delete what nothing recreates", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withAnnotation(contract.DrainForceAnnotation, "true")), reviewtest.Node("n1")), contract.RuleConfigSource, contract.DrainForceAnnotation},
		{"node drops the emptyDir switch", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1"), reviewtest.Node("n1", withAnnotation(contract.DrainDeleteEmptyDirDataAnnotation, "true"))), contract.RuleConfigSource, contract.DrainDeleteEmptyDirDataAnnotation},
		{"node moves its rollout's trial end", base, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", withAnnotation(contract.TrialEndsAnnotation, "2020-01-01T00:00:00Z")), reviewtest.Node("n1", withAnnotation(contract.TrialEndsAnnotation, "2030-01-01T00:00:00Z"))), contract.RuleConfigSource, contract.TrialEndsAnnotation},
		{"admin allows a Node's assignment to shrink it", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", withAnnotation(contract.TrialAnnotation, `{"allowShrink":true}`), withAnnotation(contract.DrainForceAnnotation, "true")), reviewtest.Node("n2")), "", ""},

		// Rule 4: minimum kubelet version at registration.
		{"old kubelet registers", minVersion, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithKubelet("v1.35.9")), nil), contract.RuleMinKubeletVersion, "below the minimum 1.36.0"},
		{"new enough kubelet registers", minVersion, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithKubelet("v1.36.0-rc.1")), nil), "", ""},
		{"kubelet without version registers", minVersion, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithKubelet("")), nil), contract.RuleMinKubeletVersion, "reports no kubelet version"},
		{"kubelet with garbage version registers", minVersion, reviewtest.NodeRequest(reviewtest.N1User, C, "", "", reviewtest.Node("n1", reviewtest.WithKubelet("latest")), nil), contract.RuleMinKubeletVersion, "unparseable"},
		{"old kubelet still reports status", minVersion, reviewtest.NodeRequest(reviewtest.N1User, U, "status", "n1", reviewtest.Node("n1", reviewtest.WithKubelet("v1.35.9")), reviewtest.Node("n1", reviewtest.WithKubelet("v1.35.9"))), "", ""},

		// Rule 5: assignments by anyone.
		{"admin assigns a good config", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/good")), reviewtest.Node("n2")), "", ""},
		{"admin assigns reservations that leave a Node little of its capacity", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2",
			reviewtest.Node("n2", reviewtest.WithAssignment("cfg/reserved"), withCapacity("2", "8Gi")), reviewtest.Node("n2", withCapacity("2", "8Gi"))), "",
			"cfg/reserved leaves node n2 less than 50% of its capacity allocatable (allocatableFloorPercent), as the Node reports its capacity: cpu: 50m of 2 allocatable (2%)"},
		{"the same reservations on a Node large enough", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2",
			reviewtest.Node("n2", reviewtest.WithAssignment("cfg/reserved"), withCapacity("64", "256Gi")), reviewtest.Node("n2", withCapacity("64", "256Gi"))), "", ""},
		{"the floor turned off", &settings.Settings{}, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2",
			reviewtest.Node("n2", reviewtest.WithAssignment("cfg/reserved"), withCapacity("2", "8Gi")), reviewtest.Node("n2", withCapacity("2", "8Gi"))), "", ""},
		{"admin assigns a gate the kubelet does not know", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate")), reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"))), contract.RuleFeatureGates, "APIServerWebhookAuthenticationToken"},
		{"admin assigns the same gate to a kubelet that knows it", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/newgate")), reviewtest.Node("n2")), "", ""},
		{"admin flips a locked gate", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/locked")), reviewtest.Node("n2")), contract.RuleFeatureGates, "CPUManagerPolicyOptions"},
		{"admin assigns at creation", base, reviewtest.NodeRequest(reviewtest.AdminUser, C, "", "", reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate")), nil), contract.RuleFeatureGates, "APIServerWebhookAuthenticationToken"},
		{"legacy assignment is judged too", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/locked")), reviewtest.Node("n2", reviewtest.WithAssignment("cfg/good"))), contract.RuleFeatureGates, "locked"},
		{"admin assigns a config that does not decode", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/broken")), reviewtest.Node("n2")), contract.RuleConfigContent, "maxPodz"},
		{"admin assigns a mutable ConfigMap", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/mutable")), reviewtest.Node("n2")), "",
			"ConfigMap cfg/mutable is mutable: once node n2 has it open, its edits keep reaching the node after the assignment or the label is removed"},
		{"admin assigns a non-eligible ConfigMap", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/plain")), reviewtest.Node("n2")), "", "not an eligible kubelet configuration"},
		{"admin assigns to a node without a version", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithKubelet(""), reviewtest.WithAssignment("cfg/newgate")), reviewtest.Node("n2", reviewtest.WithKubelet(""))), "", "judged against every kubelet nodeguard knows (1.34 to 1.37), not its own"},
		{"admin assigns a gate no kubelet knows to a node without a parseable version", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n2", reviewtest.Node("n2", reviewtest.WithKubelet("garbage"), reviewtest.WithAssignment("cfg/nosuchgate")), reviewtest.Node("n2", reviewtest.WithKubelet("garbage"))),
			contract.RuleFeatureGates, `reports no parseable kubelet version ("garbage"), and no kubelet nodeguard knows (1.34 to 1.37) can run it`},
		{"unchanged assignment is not re-judged", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "status", "n2", reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate")), reviewtest.Node("n2", reviewtest.WithKubelet("v1.35.1"), reviewtest.WithAssignment("cfg/newgate"))), "", ""},
		{"exempt user skips rule 5", forbidStatic, reviewtest.NodeRequest(reviewtest.Exempt, U, "", "n2", reviewtest.Node("n2", reviewtest.WithAssignment("cfg/locked")), reviewtest.Node("n2")), "", ""},
		{"node assigning itself is judged by rule 5 too", selfAssign, reviewtest.NodeRequest(reviewtest.N1User, U, "", "n1", reviewtest.Node("n1", reviewtest.WithAssignment("cfg/locked")), reviewtest.Node("n1")), contract.RuleFeatureGates, "locked"},

		// Rule 6: eligible ConfigMap content.
		{"create a valid config", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("new", reviewtest.GoodConfig), nil), "", ""},
		{"create with an unknown field", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("new", reviewtest.UnknownField), nil), contract.RuleConfigContent, `unknown field "maxPodz"`},
		{"create with an invalid value", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("new", invalidValue), nil), contract.RuleConfigContent, "imageGCHighThresholdPercent"},
		{"create with the wrong kind", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("new", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n"), nil), contract.RuleConfigContent, "kind"},
		{"create without the kubelet key", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, &corev1.ConfigMap{ObjectMeta: reviewtest.EligibleConfigMap("new", "").ObjectMeta}, nil), contract.RuleConfigContent, "data[kubelet]"},
		{"create with the config under binaryData", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, &corev1.ConfigMap{ObjectMeta: reviewtest.EligibleConfigMap("new", "").ObjectMeta,
			BinaryData: map[string][]byte{contract.ConfigMapKey: []byte(reviewtest.GoodConfig)}}, nil), contract.RuleConfigContent, "is under binaryData"},
		{"create with an empty config", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("new", ""), nil), contract.RuleConfigContent, "empty"},
		{"create a non-eligible ConfigMap with garbage", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.PlainConfigMap("new", "garbage"), nil), "", ""},
		{"label an invalid ConfigMap", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("x", reviewtest.UnknownField), reviewtest.PlainConfigMap("x", reviewtest.UnknownField)), contract.RuleConfigContent, "maxPodz"},
		{"unlabel an invalid ConfigMap", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.PlainConfigMap("x", reviewtest.UnknownField), reviewtest.EligibleConfigMap("x", reviewtest.GoodConfig)), "", ""},
		{"create with a forbidden field", forbidStatic, reviewtest.ConfigMapRequest(reviewtest.AdminUser, C, reviewtest.EligibleConfigMap("staticpods", staticPodsSet), nil), contract.RuleConfigContent, "staticPodPath"},
		{"change a forbidden field", forbidStatic, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("staticpods", staticPodsMove), reviewtest.EligibleConfigMap("staticpods", staticPodsSet)), contract.RuleConfigContent, "staticPodPath"},
		{"change another field beside a forbidden one", forbidStatic, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("staticpods", staticPodsMore), reviewtest.EligibleConfigMap("staticpods", staticPodsSet)), "", ""},
		{"exempt user sets a forbidden field", forbidStatic, reviewtest.ConfigMapRequest(reviewtest.Exempt, C, reviewtest.EligibleConfigMap("staticpods", staticPodsSet), nil), "", ""},
		{"nodes are never exempt", &settings.Settings{ExemptUsers: []string{"system:node:n1"}}, reviewtest.ConfigMapRequest(reviewtest.N1User, C, reviewtest.EligibleConfigMap("new", reviewtest.UnknownField), nil), contract.RuleConfigContent, "maxPodz"},
		{"edit breaks rule 5 for an assigned node", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", reviewtest.NewGateConfig), reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig)), contract.RuleConfigContent, "n2 (kubelet v1.35.1)"},
		{"edit fine for all assigned nodes warns about unknown versions", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig+"maxOpenFiles: 1000\n"), reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig)), "", "unknown-version (reports no parseable kubelet version \"garbage\")"},
		{"delete an assigned ConfigMap warns", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, D, nil, reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig)), "", "assigned to n1, n2, unknown-version"},
		{"delete an unassigned ConfigMap", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, D, nil, reviewtest.EligibleConfigMap("other", reviewtest.GoodConfig)), "", ""},

		// Malformed requests.
		{"update without the old Node", base, reviewtest.NodeRequest(reviewtest.AdminUser, U, "", "n1", reviewtest.Node("n1"), nil), RuleMalformed, "without the old object"},
		{"update without the old ConfigMap", base, reviewtest.ConfigMapRequest(reviewtest.AdminUser, U, reviewtest.EligibleConfigMap("good", reviewtest.GoodConfig), nil), RuleMalformed, "without the old object"},
		{"create without an object", base, reviewtest.NodeRequest(reviewtest.N1User, C, "", "n1", nil, nil), RuleMalformed, "without the object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := admitReview(context.Background(), newAdmitter(t, tt.settings), tt.req.Build(t))
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
	a := newAdmitter(t, settings.Default())
	for _, req := range []*admissionv1.AdmissionRequest{
		{UID: "u", Operation: admissionv1.Update, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n1", UserInfo: reviewtest.N1User,
			Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":1}}`)}, OldObject: runtime.RawExtension{Raw: []byte(`{}`)}},
		{UID: "u", Operation: admissionv1.Create, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, UserInfo: reviewtest.AdminUser,
			Object: runtime.RawExtension{Raw: []byte(`[]`)}},
		// Labels are decoded only when they changed, and then strictly.
		{UID: "u", Operation: admissionv1.Update, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n1", UserInfo: reviewtest.N1User,
			Object:    runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"n1","labels":{"a":1}}}`)},
			OldObject: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"n1","labels":{"a":"1"}}}`)}},
		{UID: "u", Operation: admissionv1.Create, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, UserInfo: reviewtest.N1User,
			Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"n1","labels":"a"}}`)}},
	} {
		if got := admitReview(context.Background(), a, req); got.Allowed || got.Rule != RuleMalformed {
			t.Errorf("Admit(%s) = %+v, want refused as malformed", req.Object.Raw, got)
		}
	}
}

var version137 = version.MustParseGeneric("1.37.0")

func TestLongErrorListsAreSummarised(t *testing.T) {
	content := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n"
	for i := 0; i < 50; i++ {
		content += "  bogus" + strings.Repeat("x", i) + ": 1Gi\n"
	}
	r := admitReview(context.Background(), newAdmitter(t, settings.Default()), reviewtest.ConfigMapRequest(reviewtest.AdminUser, admissionv1.Create, reviewtest.EligibleConfigMap("many", content), nil).Build(t))
	if r.Allowed || !strings.Contains(r.Message, "and 45 more errors") || len(r.Message) > 2000 {
		t.Fatalf("message (%d bytes): %s", len(r.Message), r.Message)
	}
}

// admitReview decides req as the /validate handler does: its objects
// decoded once, a review that does not decode refused as malformed.
func admitReview(ctx context.Context, a *Admitter, req *admissionv1.AdmissionRequest) Result {
	decoded, err := DecodeRequest(req)
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	return a.Admit(ctx, decoded)
}
