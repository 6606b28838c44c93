package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/nodeguard/nodeguard/pkg/rollout"
)

// nodePatch is one try of a change: its body and type, and the Node's
// resourceVersion it was made over.
type nodePatch struct {
	body []byte
	typ  types.PatchType
	over string
}

// guardBase returns the Node a change is guarded on (patchFor): the
// cached Node when it is the version the change was decided on, or a later
// one that moved nothing the decision read (a kubelet's status write the
// watch delivered meanwhile). It is nil when the cache holds no Node or an
// earlier version than the decision's (the decision saw the controller's
// own write, which the cache does not show yet): the resourceVersion is
// the guard then. A later version that moved what the decision read is
// errNodeMoved, without a round trip sure to fail.
func (c *Controller) guardBase(change rollout.Change, basis decisionBasis) (*corev1.Node, error) {
	cached := c.cachedNode(change.Node)
	if cached == nil {
		return nil, nil
	}
	switch order, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, change.ResourceVersion); {
	case err != nil || order < 0:
		return nil, nil
	case order == 0:
		return cached, nil
	}
	if !basis.unchanged(cached) {
		return nil, fmt.Errorf("patching Node %s: %w", change.Node, errNodeMoved)
	}
	return cached, nil
}

// patchFor renders change over base. With a base the change is guarded by
// what the decision read of it (rollout.Change.GuardedPatch), so that a
// write that moved none of it, as a kubelet's status report between the
// decision and the patch, does not fail it. Without one, or where a JSON
// patch cannot test what the decision read, the change carries the
// resourceVersion (MergePatch): base's, which moved nothing the decision
// read, else the decision's own.
func patchFor(change rollout.Change, base *corev1.Node) (nodePatch, error) {
	if base != nil {
		body, ok, err := change.GuardedPatch(base)
		if err != nil {
			return nodePatch{}, err
		}
		if ok {
			return nodePatch{body: body, typ: types.JSONPatchType, over: base.ResourceVersion}, nil
		}
		change.ResourceVersion = base.ResourceVersion
	}
	body, err := change.MergePatch()
	if err != nil {
		return nodePatch{}, err
	}
	return nodePatch{body: body, typ: types.MergePatchType, over: change.ResourceVersion}, nil
}

// nodeMoved reports whether a patch failed because the Node moved since
// the version it was made over: a conflict with its resourceVersion, or
// its guard's tests failed.
func nodeMoved(err error) bool {
	return apierrors.IsConflict(err) || rollout.IsGuardFailure(err)
}
