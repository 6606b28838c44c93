package admission

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/settings"
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
	// reported state (feature-gates judging its kubelet version, a policy that
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
	// versions says which nodes' reported kubelet versions feature-gates trusts.
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

// KubeletVersions is the record of reported kubelet versions feature-gates reads.
// Feed it every Node (its EventHandler on a Node informer); until then it
// trusts every parseable report.
func (a *Admitter) KubeletVersions() *KubeletVersions { return a.versions }

// Admit decides one request, its objects decoded (DecodeRequest): each
// resource has its one function, where its rules read in place.
func (a *Admitter) Admit(ctx context.Context, req *Request) Result {
	resource := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	if resource == rolloutsResource {
		// Everyone, exempt users too: the rule guards against a slip.
		if req.SubResource != "" {
			return allow()
		}
		return admitRollout(req)
	}
	settings := a.settings()
	nodeName, isNode := contract.NodeIdentity(req.UserInfo.Username, req.UserInfo.Groups)
	checkContent := isNode || !settings.IsExempt(req.UserInfo.Username)
	if isNode && nodeRestrictedResources.Has(resource) {
		// Only the standalone manifests send these, for clusters without
		// the in-tree NodeRestriction plugin (noderestricted.go). Like
		// NodeRestriction, judge CREATE, UPDATE and DELETE only, and refuse
		// every such write of a system:nodes member whose name does not
		// parse to a node.
		switch req.Operation {
		case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
		default:
			return allow()
		}
		if nodeName == "" {
			return refuse(RuleNodeUnidentifiedWrite, "user %q is in group system:nodes but does not name a node, so it may not write %s",
				req.UserInfo.Username, resource)
		}
	}
	switch {
	case resource == nodesResource && (req.SubResource == "" || req.SubResource == "status"):
		return a.admitNode(ctx, req, settings, nodeName, isNode, checkContent)
	case resource == configMapsResource && req.SubResource == "" && checkContent:
		return a.admitConfigMap(ctx, req, settings)
	case !isNode:
		return allow()
	}
	switch resource {
	case podsResource:
		return a.admitPod(ctx, req, nodeName)
	case pvcsResource:
		return admitPVC(req, nodeName)
	case serviceAccountsResource:
		return a.admitServiceAccountToken(ctx, req, nodeName)
	case leasesResource:
		return admitLease(req, nodeName)
	case csiNodesResource:
		return admitCSINode(req, nodeName)
	case resourceSlicesResource:
		return admitResourceSlice(req, nodeName)
	case csrsResource:
		return admitCSR(req, nodeName)
	case podCertificateRequestsResource:
		return a.admitPodCertificateRequest(ctx, req, nodeName)
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

// KubeletConfigsOf is the configurations of an eligible ConfigMap being
// created or updated, for the policies' input.nodeguard.kubeletConfig and
// .oldKubeletConfig: the decoded content the rules judged (the checker
// remembers it). Anything that does not decode is left nil (null to
// policies): the rules have already refused invalid content, except from
// exempt users.
func (a *Admitter) KubeletConfigsOf(req *Request) (cfg, old *kubeletconfigv1beta1.KubeletConfiguration) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil
	}
	cm, _ := req.Obj.(*corev1.ConfigMap)
	oldCM, _ := req.OldObj.(*corev1.ConfigMap)
	return a.eligibleConfig(cm), a.eligibleConfig(oldCM)
}
