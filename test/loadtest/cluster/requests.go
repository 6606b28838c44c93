package cluster

import (
	"fmt"
	"math/rand/v2"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// Kind is a class of authorization request.
type Kind int

const (
	// AllowedRead is a node reading a ConfigMap that a pod bound to it
	// references: both authorizers allow it.
	AllowedRead Kind = iota
	// RefusedRead is a node reading a ConfigMap of a pod bound to another
	// node: both have no opinion.
	RefusedRead
	// NonNode is a service account reading a ConfigMap: both have no
	// opinion without looking at the graph.
	NonNode
	// OwnNodeGet is a node reading its own Node, the kubelet's most common
	// request that is not a ConfigMap read; nodeguard has no opinion.
	OwnNodeGet
)

func (k Kind) String() string {
	switch k {
	case AllowedRead:
		return "allowed ConfigMap read"
	case RefusedRead:
		return "refused ConfigMap read"
	case NonNode:
		return "non-node request"
	case OwnNodeGet:
		return "node reads own Node"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Request is one authorization request and its expected answer.
type Request struct {
	Kind   Kind
	User   string
	Groups []string
	// Node is the requesting node's name, empty for NonNode.
	Node      string
	Verb      string
	Group     string
	Version   string
	Resource  string
	Namespace string
	Name      string
	// Allowed is the answer expected from both authorizers; every request
	// not allowed expects no opinion.
	Allowed bool
}

// Requests returns n requests of one kind against distinct random nodes and
// objects, the same for the same seed.
func (s Shape) Requests(kind Kind, n int, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, uint64(kind)))
	out := make([]Request, n)
	for r := range out {
		out[r] = s.request(kind, rng)
	}
	return out
}

// Mixed interleaves n requests of the given kinds in turn.
func (s Shape) Mixed(kinds []Kind, n int, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, uint64(len(kinds))))
	out := make([]Request, n)
	for r := range out {
		out[r] = s.request(kinds[r%len(kinds)], rng)
	}
	return out
}

func (s Shape) request(kind Kind, rng *rand.Rand) Request {
	i, j := rng.IntN(s.Nodes), rng.IntN(s.PodsPerNode)
	cm := PodConfigMapNames(i, j)[rng.IntN(2)]
	req := Request{
		Kind:      kind,
		User:      contract.NodeUserPrefix + NodeName(i),
		Groups:    []string{user.NodesGroup, user.AllAuthenticated},
		Node:      NodeName(i),
		Verb:      "get",
		Version:   "v1",
		Resource:  "configmaps",
		Namespace: s.PodNamespace(i, j),
		Name:      cm,
	}
	switch kind {
	case AllowedRead:
		req.Allowed = true
	case RefusedRead:
		// The ConfigMap belongs to a pod on another node.
		other := (i + 1 + rng.IntN(s.Nodes-1)) % s.Nodes
		req.Namespace = s.PodNamespace(other, j)
		req.Name = PodConfigMapNames(other, j)[0]
	case NonNode:
		req.User = "system:serviceaccount:" + req.Namespace + ":app"
		req.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + req.Namespace, user.AllAuthenticated}
		req.Node = ""
	case OwnNodeGet:
		req.Resource, req.Namespace, req.Name = "nodes", "", NodeName(i)
	}
	return req
}

// Spec is the request as the apiserver puts it in a SubjectAccessReview.
func (r Request) Spec() *authorizationv1.SubjectAccessReviewSpec {
	return &authorizationv1.SubjectAccessReviewSpec{
		User:   r.User,
		Groups: r.Groups,
		UID:    "uid-" + r.User,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: r.Namespace,
			Verb:      r.Verb,
			Group:     r.Group,
			Version:   r.Version,
			Resource:  r.Resource,
			Name:      r.Name,
		},
	}
}

// Review wraps Spec in a SubjectAccessReview ready to be sent.
func (r Request) Review() *authorizationv1.SubjectAccessReview {
	sar := &authorizationv1.SubjectAccessReview{Spec: *r.Spec()}
	sar.APIVersion, sar.Kind = authorizationv1.SchemeGroupVersion.String(), "SubjectAccessReview"
	return sar
}
