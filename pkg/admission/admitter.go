package admission

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nodeguard/nodeguard/pkg/apis/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/pkg/config"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
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
	settings   func() *config.Settings
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
func New(settings func() *config.Settings, configMaps corelisters.ConfigMapLister, g Graph) *Admitter {
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
	if errors.IsNotFound(err) {
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
