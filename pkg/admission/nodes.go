package admission

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/config"
)

// admitNode judges a write of a Node (nodes or nodes/status): rules 1 to 4
// for nodes, then rule 5 for everyone the content rules apply to.
func (a *Admitter) admitNode(ctx context.Context, req *admissionv1.AdmissionRequest, settings *config.Settings, nodeName string, isNode, checkContent bool) Result {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update && req.Operation != admissionv1.Delete {
		return allow()
	}
	var node, old *corev1.Node
	var err error
	if req.Operation != admissionv1.Delete {
		if node, err = decodeNode(req.Object, "object"); err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		if node == nil {
			return refuse(RuleMalformed, "%s of a Node without the object", req.Operation)
		}
	}
	if req.Operation == admissionv1.Update {
		// Judging an update needs what it changes; without the old
		// object there is no safe answer.
		if old, err = decodeNode(req.OldObject, "oldObject"); err != nil {
			return refuse(RuleMalformed, "%v", err)
		}
		if old == nil {
			return refuse(RuleMalformed, "UPDATE of a Node without the old object")
		}
	}
	if isNode {
		if r := admitOwnNode(req, nodeName, node); !r.Allowed {
			return r
		}
		if req.Operation == admissionv1.Delete {
			return allow()
		}
		if r := admitNodeRestriction(nodeName, node, old); !r.Allowed {
			return r
		}
		if r := a.admitSelfAssignment(settings, nodeName, node, old); !r.Allowed {
			return r
		}
		if r := admitRolloutBookkeeping(nodeName, node, old); !r.Allowed {
			return r
		}
		if req.Operation == admissionv1.Create && req.SubResource == "" {
			if r := admitMinVersion(settings.MinKubeletVersion, nodeName, node); !r.Allowed {
				return r
			}
		}
	}
	if req.Operation == admissionv1.Delete || !checkContent {
		return allow()
	}
	return a.admitAssignment(ctx, node, old)
}
