package noderestrictiondiff

import (
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/contract"
)

// divergence is a write nodeguard refuses and NodeRestriction allows, on
// purpose: the contract (docs/reference.md, docs/security.md) makes nodeguard
// stricter there. Every other disagreement fails the test.
type divergence struct {
	name string
	// why points at the rule or the reason.
	why string
	// matches says whether the write and nodeguard's refusal are this
	// divergence.
	matches func(wr *nodeWrite, refusal admission.Result) bool
}

var divergences = []divergence{
	{
		name: "a system:nodes member whose name is not system:node:NAME",
		why:  "docs/reference.md, Identities: such a user is a node with no rights; NodeRestriction does not count it as a node",
		matches: func(wr *nodeWrite, _ admission.Result) bool {
			return !strings.HasPrefix(wr.user.Username, "system:node:") && slicesContains(wr.user.Groups, "system:nodes")
		},
	},
	{
		name: "a node registers with ownerReferences",
		why:  "rule 2, CVE-2025-5187: a node that owns its Node to something can have it deleted and re-register with labels it could not set",
		matches: func(wr *nodeWrite, r admission.Result) bool {
			n, ok := wr.object.(*corev1.Node)
			return ok && wr.resource.Resource == "nodes" && wr.operation == "CREATE" && len(n.OwnerReferences) > 0 && r.Rule == contract.RuleNodeRestriction
		},
	},
	{
		name: "a node writes a nodeguard.dev label",
		why:  "rule 2: pool membership (nodeguard.dev/pool) is the administrator's word; a node labelling itself into a pool is self-assignment",
		matches: func(wr *nodeWrite, r admission.Result) bool {
			return wr.resource.Resource == "nodes" && r.Rule == contract.RuleNodeRestriction && strings.Contains(r.Message, "nodeguard.dev/")
		},
	},
	{
		name: "a node sets its own assignment or a rollout's bookkeeping",
		why:  "rule 3: self-assignment is off unless the policy allows it; a rollout's bookkeeping annotations are the controller's",
		matches: func(wr *nodeWrite, r admission.Result) bool {
			return wr.resource.Resource == "nodes" && r.Rule == contract.RuleConfigSource
		},
	},
	{
		name: "a token for an audience only an in-tree volume's CSI migration leads to",
		why:  "nodeguard does not translate in-tree volumes (awsElasticBlockStore, ...) to their CSI drivers: their drivers' audiences are left to RBAC's request-serviceaccounts-token-audience",
		matches: func(wr *nodeWrite, r admission.Result) bool {
			return r.Rule == admission.RuleNodeTokens && strings.Contains(r.Message, "apps/legacy")
		},
	},
}

// undone is every write nodeguard allows and NodeRestriction refuses where
// NodeRestriction allows the object as the apiserver stores it: the
// registry undid, before any webhook saw it, the very change
// NodeRestriction refused (a status write's spec, a dropped legacy
// configSource, ...), so nothing is let through.
var undone = divergence{
	name: "the apiserver undoes the change NodeRestriction refuses",
	why:  "NodeRestriction judges a write before the registry prepares it; a webhook after",
}

// equivalents are writes nodeguard allows and NodeRestriction refuses
// where the node gets nothing it could not get by the write NodeRestriction
// allows. Every other such disagreement fails the test.
var equivalents = []divergence{
	{
		name: "a token for exactly the apiserver's own audiences",
		why: "a validating webhook receives a TokenRequest that named no audience with the apiserver's audiences filled in, " +
			"and cannot tell it from one that names them: it judges both as naming none. The token is the same either way, and " +
			"NodeRestriction allows the node the request that names none",
		matches: func(wr *nodeWrite, _ admission.Result) bool {
			tr, ok := wr.object.(*authenticationv1.TokenRequest)
			return ok && len(tr.Spec.Audiences) == 1 && tr.Spec.Audiences[0] == apiAudience
		},
	},
}

// expectedEquivalent is the listed equivalent an allowance is, or nil.
func expectedEquivalent(wr *nodeWrite) *divergence {
	for i := range equivalents {
		if equivalents[i].matches(wr, admission.Result{}) {
			return &equivalents[i]
		}
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// expectedDivergence is the listed divergence a refusal is, or nil.
func expectedDivergence(wr *nodeWrite, refusal admission.Result) *divergence {
	for i := range divergences {
		if divergences[i].matches(wr, refusal) {
			return &divergences[i]
		}
	}
	return nil
}
