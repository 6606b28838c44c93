package admission

import (
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/settings"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/json"
)

// The rules that are not the contract's numbered ones (contract.Rule).
const (
	// RuleRolloutSelector refuses a KubeletConfigRollout whose nodeSelector
	// a node can satisfy with labels it writes itself (rollouts.go). It is
	// not one of the contract's rules for node writes: it judges everyone.
	RuleRolloutSelector contract.Rule = "rollout selector"
	// RuleMalformed refuses a review that names a resource it cannot
	// judge, such as an UPDATE without the old object.
	RuleMalformed contract.Rule = "malformed request"
	// RuleInternal refuses when nodeguard itself failed; the webhook's
	// failurePolicy would refuse too.
	RuleInternal contract.Rule = "internal error"
)

// Result is the outcome of one review. Rule and Message are set when the
// request is refused.
type Result struct {
	Allowed  bool
	Rule     contract.Rule
	Message  string
	Warnings []string
	// NodeState marks a refusal that concerns the target Node's own
	// reported state (rule 5 judging its kubelet version, a policy that
	// declares its denial node-scoped) rather than what is assigned to it.
	// The answer then carries a contract.CauseNodeState cause, so that
	// the rollout controller skips that Node and goes on with the others:
	// otherwise one node could fail a whole pool by what it reports.
	NodeState bool
}

func allow(warnings ...string) Result { return Result{Allowed: true, Warnings: warnings} }

func refuse(rule contract.Rule, format string, args ...any) Result {
	return Result{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// refuseForNodeState is refuse for a refusal that concerns the target
// Node's own reported state (see Result.NodeState).
func refuseForNodeState(rule contract.Rule, format string, args ...any) Result {
	r := refuse(rule, format, args...)
	r.NodeState = true
	return r
}

// Graph is what admission reads of the graph: which nodes a ConfigMap is
// assigned to, and their kubelet versions.
type Graph interface {
	NodesAssignedTo(namespace, name string) []string
	Node(name string) (*graph.NodeInfo, bool)
}

// Admitter decides AdmissionReviews. It is safe for concurrent use.
type Admitter struct {
	settings   func() *settings.Settings
	configMaps corelisters.ConfigMapLister
	graph      Graph
	// configs remembers decoded configurations: the same pool's content
	// comes back with every node assigned it and every re-apply.
	configs *kubeletconfig.Checker
	// versions says which nodes' reported kubelet versions rule 5 trusts.
	versions *KubeletVersions
	// cluster is what NodeRestriction's rules look up beside the request
	// (standalone manifests only); noCluster until SetCluster.
	cluster Cluster
}

// New returns an Admitter. settings returns the settings (NodeguardPolicy)
// in force at each call; configMaps lists eligible ConfigMaps with their
// data.
func New(settings func() *settings.Settings, configMaps corelisters.ConfigMapLister, g Graph) *Admitter {
	return &Admitter{settings: settings, configMaps: configMaps, graph: g,
		configs: kubeletconfig.NewChecker(kubeletconfig.DefaultCheckerEntries), versions: NewKubeletVersions(),
		cluster: noCluster{}}
}

// SetCluster gives NodeRestriction's rules the cluster state they look up
// (the pod a token is bound to, ...). Call it before the first Admit;
// without it those writes are refused.
func (a *Admitter) SetCluster(c Cluster) {
	if c == nil {
		c = noCluster{}
	}
	a.cluster = c
}

// KubeletVersions is the record of reported kubelet versions rule 5 reads.
// Feed it every Node (its EventHandler on a Node informer); until then it
// trusts every parseable report.
func (a *Admitter) KubeletVersions() *KubeletVersions { return a.versions }

// Admit decides one request.
func (a *Admitter) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) Result {
	if req.Resource.Group == v1alpha1.GroupName && req.Resource.Resource == rolloutsResource {
		// Everyone, exempt users too: the rule guards against a slip.
		if req.SubResource != "" {
			return allow()
		}
		return admitRollout(req)
	}
	settings := a.settings()
	nodeName, isNode := contract.NodeIdentity(req.UserInfo.Username, req.UserInfo.Groups)
	checkContent := isNode || !settings.IsExempt(req.UserInfo.Username)
	if isNode {
		// Only the standalone manifests send these, for clusters without
		// the in-tree NodeRestriction plugin (noderestricted.go).
		if r, ok := a.admitNodeRestricted(ctx, req, nodeName); ok {
			return r
		}
	}
	if req.Resource.Group != "" {
		return allow()
	}
	switch req.Resource.Resource {
	case "nodes":
		if req.SubResource != "" && req.SubResource != "status" {
			return allow()
		}
		return a.admitNode(ctx, req, settings, nodeName, isNode, checkContent)
	case "configmaps":
		if req.SubResource != "" || !checkContent {
			return allow()
		}
		return a.admitConfigMap(ctx, req, settings)
	}
	return allow()
}

// eligibleConfigMap returns an eligible ConfigMap with its data, or nil.
func (a *Admitter) eligibleConfigMap(ref contract.ConfigMapRef) (*corev1.ConfigMap, error) {
	cm, err := a.configMaps.ConfigMaps(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up ConfigMap %s: %w", ref, err)
	}
	if !contract.IsEligible(cm.Labels) {
		return nil, nil
	}
	return cm, nil
}

// KubeletConfigsOf decodes the configurations of an eligible ConfigMap
// being created or updated, for the policies' input.nodeguard.kubeletConfig
// and .oldKubeletConfig. Anything that does not decode is left nil (null to
// policies): the built-in rules have already refused invalid content, except
// from exempt users.
func (a *Admitter) KubeletConfigsOf(req *admissionv1.AdmissionRequest) (cfg, old *kubeletconfigv1beta1.KubeletConfiguration) {
	if req.Resource.Group != "" || req.Resource.Resource != "configmaps" || req.SubResource != "" {
		return nil, nil
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil
	}
	if cm, err := decodeConfigMap(req.Object, "object"); err == nil {
		cfg = a.eligibleConfig(cm)
	}
	if req.Operation == admissionv1.Update {
		old, _ = a.storedConfig(req.OldObject)
	}
	return cfg, old
}

// decodeObject decodes an object of the review into its API type
// case-sensitively, refusing repeated keys, with any stricter options on
// top; nil raw gives nil.
func decodeObject[T any](raw runtime.RawExtension, which, kind string, stricter ...json.StrictOption) (*T, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	obj := new(T)
	strict, err := json.UnmarshalStrict(raw.Raw, obj, append([]json.StrictOption{json.DisallowDuplicateFields}, stricter...)...)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding the %s as a %s: %w", which, kind, err)
	}
	return obj, nil
}

func decodeNode(raw runtime.RawExtension, which string) (*corev1.Node, error) {
	return decodeObject[corev1.Node](raw, which, "Node")
}

func decodeConfigMap(raw runtime.RawExtension, which string) (*corev1.ConfigMap, error) {
	return decodeObject[corev1.ConfigMap](raw, which, "ConfigMap")
}

// decodePod decodes a pod of the review; a missing one is an error, since
// every pod rule reads one.
func decodePod(raw runtime.RawExtension, which string) (*corev1.Pod, error) {
	return decodeRequired[corev1.Pod](raw, which, "Pod")
}

// decodeRequired is decodeObject for an object the rule cannot judge
// without: a missing one is an error.
func decodeRequired[T any](raw runtime.RawExtension, which, kind string) (*T, error) {
	obj, err := decodeObject[T](raw, which, kind)
	if err == nil && obj == nil {
		err = fmt.Errorf("the review carries no %s", which)
	}
	return obj, err
}
