package noderestrictiondiff

import (
	"fmt"
	"math/rand/v2"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// generator draws node writes from a seeded source. Each resource has its
// own generator (gen_*.go) that varies every field its rule reads, around
// values that pass and values that do not.
type generator struct {
	r *rand.Rand
	w *world
}

func newGenerator(seed uint64, w *world) *generator {
	return &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), w: w}
}

// resourceGenerators are the resources NodeRestriction judges, each drawn
// equally often.
var resourceGenerators = []struct {
	name string
	gen  func(*generator) *nodeWrite
}{
	{"pods", (*generator).pod},
	{"pods/status", (*generator).podStatus},
	{"pods/eviction", (*generator).podEviction},
	{"nodes", (*generator).node},
	{"leases", (*generator).lease},
	{"csinodes", (*generator).csiNode},
	{"certificatesigningrequests", (*generator).csr},
	{"resourceslices", (*generator).resourceSlice},
	{"serviceaccounts/token", (*generator).token},
	{"persistentvolumeclaims", (*generator).pvc},
	{"podcertificaterequests", (*generator).podCertificateRequest},
}

// next draws one write, its objects defaulted as the apiserver defaults
// them before admission.
func (g *generator) next() *nodeWrite {
	wr := resourceGenerators[g.r.IntN(len(resourceGenerators))].gen(g)
	wr.user = g.user()
	for _, obj := range []runtime.Object{wr.object, wr.old} {
		if obj != nil {
			legacyscheme.Scheme.Default(obj)
		}
	}
	return wr
}

// user is mostly node n1, sometimes a system:nodes member without a node
// name, a node's name outside system:nodes, or an administrator.
func (g *generator) user() authenticationv1.UserInfo {
	switch n := g.r.IntN(100); {
	case n < 85:
		return authenticationv1.UserInfo{Username: "system:node:" + ownNode, Groups: []string{"system:nodes", "system:authenticated"}}
	case n < 90:
		return authenticationv1.UserInfo{Username: "system:node:", Groups: []string{"system:nodes", "system:authenticated"}}
	case n < 94:
		return authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:nodes", "system:authenticated"}}
	case n < 97:
		return authenticationv1.UserInfo{Username: "system:node:" + ownNode, Groups: []string{"system:authenticated"}}
	default:
		return authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters", "system:authenticated"}}
	}
}

func (g *generator) coin() bool { return g.r.IntN(2) == 0 }

// oneIn is true with probability 1/n.
func (g *generator) oneIn(n int) bool { return g.r.IntN(n) == 0 }

func pick[T any](g *generator, options ...T) T { return options[g.r.IntN(len(options))] }

// operation draws an operation, mostly those the rule judges.
func (g *generator) operation(likely ...admissionv1.Operation) admissionv1.Operation {
	if g.oneIn(5) {
		return pick(g, admissionv1.Create, admissionv1.Update, admissionv1.Delete)
	}
	return pick(g, likely...)
}

// write starts a write of resource (group, version, resource) and kind.
func write(what string, gv schema.GroupVersion, resource, kind string) *nodeWrite {
	return &nodeWrite{what: what, resource: gv.WithResource(resource), kind: gv.WithKind(kind)}
}

// withObjects fills object and old as the apiserver does for op: the new
// object on CREATE and UPDATE, the stored one on UPDATE and DELETE. name
// is the request's name: on CREATE the apiserver takes it from the object.
func (wr *nodeWrite) withObjects(op admissionv1.Operation, name string, object, old runtime.Object) *nodeWrite {
	wr.operation, wr.name = op, name
	switch op {
	case admissionv1.Create:
		wr.object = object
	case admissionv1.Update:
		wr.object, wr.old = object, old
	case admissionv1.Delete:
		wr.old = old
	}
	return wr
}

func (wr *nodeWrite) String() string {
	return fmt.Sprintf("%s as %q: %s %s%s %s/%s", wr.what, wr.user.Username, wr.operation, wr.resource.Resource,
		suffix(wr.subresource), wr.namespace, wr.name)
}

func suffix(subresource string) string {
	if subresource == "" {
		return ""
	}
	return "/" + subresource
}
