package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
)

// tokenAudienceVerb is the verb RBAC grants a node to request tokens for an
// audience its pods do not name (the kubelet's image credential providers
// need it), as NodeRestriction asks its authorizer.
const tokenAudienceVerb = "request-serviceaccounts-token-audience"

// admitServiceAccountToken is NodeRestriction's TokenRequest rule: a node
// asks for a service account's token only bound to a pod that runs on it
// (by name and UID), and only for an audience that pod uses or that RBAC
// grants it (ServiceAccountNodeAudienceRestriction, on by default since
// 1.33). A token bound to no pod outlives every pod and is accepted
// wherever the service account is, so that a node could keep any service
// account's rights for as long as the token lives; one for any audience
// would let it impersonate the pod to every other service.
func (a *Admitter) admitServiceAccountToken(ctx context.Context, req *Request, nodeName string) Result {
	if req.Operation != admissionv1.Create || req.SubResource != "token" {
		return allow()
	}
	tr, err := required[authenticationv1.TokenRequest](req.Obj, "object")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return refuse(RuleNodeTokens, "node %q may only request a token of service account %s/%s bound to a pod", nodeName, req.Namespace, req.Name)
	}
	if ref.UID == "" {
		return refuse(RuleNodeTokens, "node %q may only request a token bound to a pod by UID as well as by name", nodeName)
	}
	pod, err := a.cluster.Pod(ctx, req.Namespace, ref.Name)
	if err != nil {
		return refuse(RuleNodeTokens, "cannot check pod %s/%s the token would be bound to: %v", req.Namespace, ref.Name, err)
	}
	if ref.UID != pod.UID {
		return refuse(RuleNodeTokens, "node %q may not request a token bound to pod %s/%s with UID %q: the pod's UID is %q (deleted and re-created?)",
			nodeName, req.Namespace, ref.Name, ref.UID, pod.UID)
	}
	if pod.Spec.NodeName != nodeName {
		return refuse(RuleNodeTokens, "node %q may not request a token bound to pod %s/%s: it runs on %q", nodeName, req.Namespace, ref.Name, pod.Spec.NodeName)
	}
	if err := a.checkTokenAudience(ctx, req, tr, pod); err != nil {
		return refuse(RuleNodeTokens, "node %q may not request this token of service account %s/%s: %v", nodeName, req.Namespace, req.Name, err)
	}
	return allow()
}

// checkTokenAudience allows the one audience (or none) a token request may
// name when the pod uses it, or else when the authorizers let the node
// request it. Like NodeRestriction, a lookup that fails while looking for
// it refuses, without asking the authorizers.
func (a *Admitter) checkTokenAudience(ctx context.Context, req *Request, tr *authenticationv1.TokenRequest, pod *corev1.Pod) error {
	requested := tr.Spec.Audiences
	// The apiserver filled in its own audiences where the request named
	// none, before this webhook (not before NodeRestriction, which runs
	// earlier): read them back as none.
	apiAudiences, err := a.cluster.APIAudiences(ctx)
	if err != nil {
		return err
	}
	if sameSet(requested, apiAudiences) {
		requested = nil
	}
	var audience string
	switch len(requested) {
	case 0:
	case 1:
		audience = requested[0]
	default:
		return errors.New("a node may request at most one audience")
	}
	found, err := a.podUsesAudience(ctx, pod, audience)
	if err != nil {
		return fmt.Errorf("looking for audience %q in pod %s/%s: %w", audience, pod.Namespace, pod.Name, err)
	}
	if found {
		return nil
	}
	allowed, err := a.cluster.Authorize(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Namespace: req.Namespace, Verb: tokenAudienceVerb,
		Group: req.Resource.Group, Version: req.Resource.Version, Resource: audience, Name: req.Name,
	})
	switch {
	case allowed:
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("pod %s/%s does not use audience %q, and RBAC does not let the node %s it", pod.Namespace, pod.Name, audience, tokenAudienceVerb)
}

// podUsesAudience reports whether a projected token of the pod, or a CSI
// driver one of its volumes uses (inline, through a claim, or through an
// ephemeral volume's claim), asks for audience. In-tree volumes that the
// CSI migration would hand to a CSI driver are not translated here: their
// driver's audiences are left to RBAC, stricter than NodeRestriction.
func (a *Admitter) podUsesAudience(ctx context.Context, pod *corev1.Pod, audience string) (bool, error) {
	var errs []error
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			for _, source := range v.Projected.Sources {
				if source.ServiceAccountToken != nil && source.ServiceAccountToken.Audience == audience {
					return true, nil
				}
			}
		}
		var driver string
		var err error
		switch {
		case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
			// The claim an ephemeral volume gets is named after the pod
			// and the volume (k8s.io/component-helpers/storage/ephemeral).
			driver, err = a.csiDriverOfClaim(ctx, pod.Namespace, pod.Name+"-"+v.Name)
		case v.PersistentVolumeClaim != nil:
			driver, err = a.csiDriverOfClaim(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.CSI != nil:
			driver = v.CSI.Driver
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if driver == "" {
			continue
		}
		csiDriver, err := a.cluster.CSIDriver(ctx, driver)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, tokenRequest := range csiDriver.Spec.TokenRequests {
			if tokenRequest.Audience == audience {
				return true, nil
			}
		}
	}
	return false, errors.Join(errs...)
}

// csiDriverOfClaim follows a claim to its volume and returns the CSI driver
// behind it, "" for a volume that is not CSI.
func (a *Admitter) csiDriverOfClaim(ctx context.Context, namespace, claimName string) (string, error) {
	claim, err := a.cluster.PersistentVolumeClaim(ctx, namespace, claimName)
	if err != nil {
		return "", err
	}
	volume, err := a.cluster.PersistentVolume(ctx, claim.Spec.VolumeName)
	if err != nil {
		return "", err
	}
	if volume.Spec.CSI != nil {
		return volume.Spec.CSI.Driver, nil
	}
	return "", nil
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
