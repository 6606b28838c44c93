package compare

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	intree "k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// minKubeletVersion is the minimum nodeguard's authorizer is given. Setting
// one makes every node request also check the node's kubelet version,
// which is the dearer path and the one a production install takes.
const minKubeletVersion = "1.35.0"

func newOurAuthorizer(g *graph.Graph) *authz.Authorizer {
	return authz.New(g, version.MustParseGeneric(minKubeletVersion))
}

// The two contenders are written out separately rather than behind an
// interface: a dynamic call per decision would be a visible share of a
// lookup that takes tens of nanoseconds.

// buildOurs populates a nodeguard graph the way the informers do before
// sync (every Node, eligible ConfigMap and Pod), then publishes it.
func buildOurs(c *cluster.Cluster) *graph.Graph {
	g := graph.New(nil)
	for _, n := range c.Nodes {
		g.UpsertNode(n)
	}
	for _, cm := range c.ConfigMaps {
		g.UpsertConfigMap(cm)
	}
	for _, p := range c.Pods {
		g.UpsertPod(p)
	}
	g.MarkSynced()
	return g
}

// buildInTree populates the in-tree graph with the same pods. It has no
// notion of Nodes or eligible ConfigMaps: its node vertices come from the
// pods.
func buildInTree(c *cluster.Cluster) *intree.Graph {
	g := intree.NewGraph()
	for _, p := range c.Pods {
		g.AddPod(p)
	}
	return g
}

func newInTreeAuthorizer(g *intree.Graph) *intree.NodeAuthorizer {
	return intree.NewAuthorizer(g, nodeidentifier.NewDefaultNodeIdentifier(), bootstrappolicy.NodeRules())
}

// ourRequests converts requests once, outside any timed loop.
func ourRequests(reqs []cluster.Request) ([]*authorizationv1.SubjectAccessReviewSpec, []authz.Decision) {
	specs := make([]*authorizationv1.SubjectAccessReviewSpec, len(reqs))
	want := make([]authz.Decision, len(reqs))
	for i, r := range reqs {
		specs[i] = r.Spec()
		if r.Allowed {
			want[i] = authz.Allow
		}
	}
	return specs, want
}

// inTreeRequests converts requests to the attributes the apiserver hands
// its in-process authorizers. They are stored as interface values of
// pointers so that a call converts and allocates nothing.
func inTreeRequests(reqs []cluster.Request) ([]authorizer.Attributes, []authorizer.Decision) {
	attrs := make([]authorizer.Attributes, len(reqs))
	want := make([]authorizer.Decision, len(reqs))
	for i, r := range reqs {
		attrs[i] = &authorizer.AttributesRecord{
			User:            &user.DefaultInfo{Name: r.User, Groups: r.Groups},
			Verb:            r.Verb,
			Namespace:       r.Namespace,
			APIGroup:        r.Group,
			APIVersion:      r.Version,
			Resource:        r.Resource,
			Name:            r.Name,
			ResourceRequest: true,
		}
		want[i] = authorizer.DecisionNoOpinion
		if r.Allowed {
			want[i] = authorizer.DecisionAllow
		}
	}
	return attrs, want
}

// checkAgreement runs every request through both authorizers and fails on
// any answer other than the expected one, so that no figure is ever taken
// from a graph that decides differently.
func checkAgreement(ours *authz.Authorizer, theirs *intree.NodeAuthorizer, reqs []cluster.Request) error {
	specs, ourWant := ourRequests(reqs)
	attrs, theirWant := inTreeRequests(reqs)
	for i, r := range reqs {
		if got := ours.Authorize(specs[i]); got.Decision != ourWant[i] {
			return fmt.Errorf("nodeguard answered %s (%s) to %s %+v, want %s", got.Decision, got.Reason, r.Kind, r, ourWant[i])
		}
		if got, reason, _ := theirs.Authorize(context.Background(), attrs[i]); got != theirWant[i] {
			return fmt.Errorf("in-tree answered %v (%s) to %s %+v, want %v", got, reason, r.Kind, r, theirWant[i])
		}
	}
	return nil
}

// writePod is the pod the contention writer adds and deletes: one more pod
// on node 0, with two ConfigMaps of its own, like every other pod.
func writePod(s cluster.Shape) *corev1.Pod { return s.Pod(0, s.PodsPerNode) }
