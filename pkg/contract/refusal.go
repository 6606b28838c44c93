package contract

import (
	"errors"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsNodeStateRefusal reports whether err is an API error whose status
// carries a CauseNodeState cause: nodeguard's admission refused the write
// for the target Node's own reported state (the feature-gates rule on its kubelet version,
// a node-scoped policy), not for what was assigned. The apiserver passes a
// webhook's status through to the client unchanged, wrapped errors included
// here, so a client reads it from the error its write returned.
func IsNodeStateRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details != nil && slices.ContainsFunc(details.Causes, func(c metav1.StatusCause) bool { return c.Type == CauseNodeState })
}
