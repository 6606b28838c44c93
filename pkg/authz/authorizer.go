package authz

import (
	"sync/atomic"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

// Decision is the outcome of one review.
type Decision int

const (
	// NoOpinion leaves the request to the next authorizer in the chain.
	NoOpinion Decision = iota
	// Allow ends the chain with an allow.
	Allow
	// Deny ends the chain with a denial, whatever later authorizers say.
	Deny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	default:
		return "no-opinion"
	}
}

// Result is a decision and the reason for it. Reason is never empty.
type Result struct {
	Decision Decision
	Reason   string
}

// The reasons are fixed strings so that deciding allocates nothing, and so
// that they can double as metric labels.
const (
	ReasonNotANode          = "user is not a node"
	ReasonUnknownNode       = "user is in system:nodes but its name does not name a node"
	ReasonGraphNotSynced    = "the graph has not synced yet"
	ReasonKubeletTooOld     = "node's kubelet is older than the minimum kubelet version; only reading and updating its own Node is left to other authorizers"
	ReasonKubeletUnknown    = "node's kubelet version is missing or unparseable and a minimum kubelet version is set; only reading and updating its own Node is left to other authorizers"
	ReasonOwnNodeWhileOld   = "node's kubelet is below the minimum version, but it may still read and update its own Node"
	ReasonNotConfigMapRead  = "not a ConfigMap read; left to other authorizers"
	ReasonUnnamedConfigMap  = "ConfigMap list or watch without a metadata.name field selector"
	ReasonConfigMapReadable = "node may read the ConfigMap: it is assigned to the node or used by a pod bound to it"
	ReasonNoPath            = "no path from the ConfigMap to the node in the graph"
	ReasonNonResource       = "non-resource request; left to other authorizers"
	ReasonInternalError     = "internal error; left to other authorizers"
	ReasonTimedOut          = "request timed out before a decision; left to other authorizers"
)

// GraphReader is what the authorizer needs of the graph.
type GraphReader interface {
	Synced() bool
	CanReadConfigMap(node, namespace, name string) bool
	Node(name string) (*graph.NodeInfo, bool)
}

// Authorizer decides SubjectAccessReviews. It is safe for concurrent use.
type Authorizer struct {
	graph      GraphReader
	minVersion atomic.Pointer[version.Version]
}

// New returns an Authorizer reading g. minKubeletVersion may be nil for no
// minimum.
func New(g GraphReader, minKubeletVersion *version.Version) *Authorizer {
	a := &Authorizer{graph: g}
	a.SetMinKubeletVersion(minKubeletVersion)
	return a
}

// SetMinKubeletVersion replaces the minimum kubelet version; nil removes it.
// It takes effect for the next review.
func (a *Authorizer) SetMinKubeletVersion(v *version.Version) { a.minVersion.Store(v) }

// MinKubeletVersion returns the minimum in force, or nil.
func (a *Authorizer) MinKubeletVersion() *version.Version { return a.minVersion.Load() }

// Authorize decides one review.
func (a *Authorizer) Authorize(spec *authorizationv1.SubjectAccessReviewSpec) Result {
	nodeName, isNode := contract.NodeIdentity(spec.User, spec.Groups)
	if !isNode {
		return Result{NoOpinion, ReasonNotANode}
	}
	if nodeName == "" {
		return Result{NoOpinion, ReasonUnknownNode}
	}
	if !a.graph.Synced() {
		return Result{NoOpinion, ReasonGraphNotSynced}
	}
	ra := spec.ResourceAttributes
	if min := a.minVersion.Load(); min != nil {
		if reason, tooOld := a.kubeletBelow(nodeName, min); tooOld {
			if isOwnNodeReadOrUpdate(ra, nodeName) {
				return Result{NoOpinion, ReasonOwnNodeWhileOld}
			}
			return Result{Deny, reason}
		}
	}
	if ra == nil {
		return Result{NoOpinion, ReasonNonResource}
	}
	if ra.Group != "" || ra.Resource != "configmaps" || ra.Subresource != "" || !isRead(ra.Verb) {
		return Result{NoOpinion, ReasonNotConfigMapRead}
	}
	// For list and watch the apiserver fills the name from a
	// metadata.name field selector; without one the request covers every
	// ConfigMap in the namespace, which no path can justify.
	if ra.Name == "" {
		return Result{NoOpinion, ReasonUnnamedConfigMap}
	}
	if a.graph.CanReadConfigMap(nodeName, ra.Namespace, ra.Name) {
		return Result{Allow, ReasonConfigMapReadable}
	}
	return Result{NoOpinion, ReasonNoPath}
}

// kubeletBelow reports whether the node's kubelet is below min. A node the
// graph does not know yet has not registered and reported no version, so
// there is nothing to hold against it.
func (a *Authorizer) kubeletBelow(nodeName string, min *version.Version) (string, bool) {
	info, ok := a.graph.Node(nodeName)
	if !ok {
		return "", false
	}
	if info.ParsedKubeletVersion == nil {
		return ReasonKubeletUnknown, true
	}
	if info.ParsedKubeletVersion.LessThan(min) {
		return ReasonKubeletTooOld, true
	}
	return "", false
}

func isRead(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

func isOwnNodeReadOrUpdate(ra *authorizationv1.ResourceAttributes, nodeName string) bool {
	if ra == nil || ra.Group != "" || ra.Resource != "nodes" || ra.Name != nodeName {
		return false
	}
	if ra.Subresource != "" && ra.Subresource != "status" {
		return false
	}
	switch ra.Verb {
	case "get", "update", "patch":
		return true
	}
	return false
}
