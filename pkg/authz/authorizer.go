package authz

import (
	"strings"
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
	ReasonNotANode          = "user is not a node (system:node:<name> in group system:nodes)"
	ReasonUnknownNode       = "user is in system:nodes but its name does not name a node"
	ReasonGraphNotSynced    = "the graph has not synced yet"
	ReasonGraphStale        = "the graph is stale: its watches on the apiserver have been cut for longer than --graph-stale-after, so a path it holds may have been revoked; left to other authorizers"
	ReasonKubeletTooOld     = "node's kubelet is older than the minimum kubelet version; only reading and updating its own Node is left to other authorizers"
	ReasonKubeletUnknown    = "node's kubelet version is missing or unparseable and a minimum kubelet version is set; only reading and updating its own Node is left to other authorizers"
	ReasonOwnNodeWhileOld   = "node's kubelet is below the minimum version, but it may still read and update its own Node"
	ReasonNotConfigMapRead  = "not a ConfigMap read; left to other authorizers"
	ReasonUnnamedConfigMap  = "ConfigMap list or watch without a metadata.name field selector"
	ReasonConfigMapReadable = "node may read the ConfigMap: it is assigned to the node or used by a pod bound to it"
	ReasonNoPath            = "no path from the ConfigMap to the node in the graph"
	ReasonNonResource       = "non-resource request; left to other authorizers"
	// ReasonOwnKubeletConfig allows a node to get nodes/configz of its own
	// Node: the SubjectAccessReview its kubelet sends when the node's agent
	// reads that kubelet's running configuration (/configz, /flagz).
	ReasonOwnKubeletConfig = "node may read its own kubelet's running configuration (get nodes/configz of its own Node)"
	ReasonInternalError    = "internal error; left to other authorizers"
	ReasonTimedOut         = "request timed out before a decision; left to other authorizers"
)

// GraphReader is what the authorizer needs of the graph.
type GraphReader interface {
	Synced() bool
	// Stale reports that the graph may have missed changes, so that its
	// paths may no longer hold.
	Stale() bool
	// Lookup returns the node's Node object (nil when none) and whether a
	// path leads from the ConfigMap to the node, in one walk.
	Lookup(node, namespace, name string) (*graph.NodeInfo, bool)
	Node(name string) (*graph.NodeInfo, bool)
}

// minimum is a minimum kubelet version with its parts inline, compared
// against graph.NodeInfo.VersionParts without chasing pointers.
type minimum struct {
	version *version.Version
	parts   [3]uint
}

// Authorizer decides SubjectAccessReviews. It is safe for concurrent use.
type Authorizer struct {
	graph      GraphReader
	minVersion atomic.Pointer[minimum]
}

// New returns an Authorizer reading g. minKubeletVersion may be nil for no
// minimum.
func New(g GraphReader, minKubeletVersion *version.Version) *Authorizer {
	a := &Authorizer{graph: g}
	a.SetMinKubeletVersion(minKubeletVersion)
	return a
}

// SetMinKubeletVersion replaces the minimum kubelet version; nil removes it.
// It takes effect for the next review. Only major, minor and patch count,
// as for generic versions: a pre-release of the minimum meets it.
func (a *Authorizer) SetMinKubeletVersion(v *version.Version) {
	if v == nil {
		a.minVersion.Store(nil)
		return
	}
	a.minVersion.Store(&minimum{version: v, parts: [3]uint{v.Major(), v.Minor(), v.Patch()}})
}

// MinKubeletVersion returns the minimum in force, or nil.
func (a *Authorizer) MinKubeletVersion() *version.Version {
	if m := a.minVersion.Load(); m != nil {
		return m.version
	}
	return nil
}

// Authorize decides one review.
func (a *Authorizer) Authorize(spec *authorizationv1.SubjectAccessReviewSpec) Result {
	// A user without a node's name is never granted anything here, in
	// system:nodes or not, so it is answered before its groups are read.
	if !strings.HasPrefix(spec.User, contract.NodeUserPrefix) {
		return Result{NoOpinion, ReasonNotANode}
	}
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
	cmRead := ra != nil && ra.Group == "" && ra.Resource == "configmaps" && ra.Subresource == "" && isRead(ra.Verb)
	min := a.minVersion.Load()
	var info *graph.NodeInfo
	var canRead bool
	switch {
	case cmRead && ra.Name != "":
		info, canRead = a.graph.Lookup(nodeName, ra.Namespace, ra.Name)
	case min != nil:
		info, _ = a.graph.Node(nodeName)
	}
	// A node the graph does not know has not registered and reported no
	// version, so there is nothing to hold against it.
	if min != nil && info != nil {
		if reason, tooOld := kubeletBelow(info, min); tooOld {
			if isOwnNodeReadOrUpdate(ra, nodeName) {
				return Result{NoOpinion, ReasonOwnNodeWhileOld}
			}
			return Result{Deny, reason}
		}
	}
	switch {
	case ra == nil:
		return Result{NoOpinion, ReasonNonResource}
	case isOwnConfigz(ra, nodeName):
		// Its own kubelet's configuration and flags, nothing more: no
		// proxy, no other subresource, no other Node.
		return Result{Allow, ReasonOwnKubeletConfig}
	case !cmRead:
		return Result{NoOpinion, ReasonNotConfigMapRead}
	case ra.Name == "":
		// For list and watch the apiserver fills the name from a
		// metadata.name field selector; without one the request covers
		// every ConfigMap in the namespace, which no path can justify.
		return Result{NoOpinion, ReasonUnnamedConfigMap}
	case a.graph.Stale():
		// Refusals above still stand: a stale graph can only have missed
		// a revocation or a grant, and a missed grant merely delays a
		// read. Its own reason also keeps policies from turning it into
		// an Allow (they act on ReasonNoPath alone).
		return Result{NoOpinion, ReasonGraphStale}
	case canRead:
		return Result{Allow, ReasonConfigMapReadable}
	}
	return Result{NoOpinion, ReasonNoPath}
}

func kubeletBelow(info *graph.NodeInfo, min *minimum) (string, bool) {
	if info.ParsedKubeletVersion == nil {
		return ReasonKubeletUnknown, true
	}
	for i, p := range info.VersionParts {
		if p != min.parts[i] {
			if p < min.parts[i] {
				return ReasonKubeletTooOld, true
			}
			return "", false
		}
	}
	return "", false
}

// isOwnConfigz reports a get of nodes/configz of the node's own Node.
func isOwnConfigz(ra *authorizationv1.ResourceAttributes, nodeName string) bool {
	return ra.Group == "" && ra.Resource == "nodes" && ra.Subresource == "configz" && ra.Verb == "get" &&
		ra.Name == nodeName && ra.Namespace == ""
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
