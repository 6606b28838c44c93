package contract

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsNodeStateRefusal(t *testing.T) {
	refusal := func(causes ...metav1.StatusCause) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Message: `admission webhook "nodes.nodeguard.dev" denied the request: nodeguard rule 5 (feature-gates): ...`,
			Details: &metav1.StatusDetails{Name: "n1", Kind: "nodes", Causes: causes}}}
	}
	nodeState := metav1.StatusCause{Type: CauseNodeState, Message: "about the node"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"node state", refusal(nodeState), true},
		{"node state among other causes", refusal(metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid}, nodeState), true},
		{"wrapped", fmt.Errorf("assigning n1: %w", refusal(nodeState)), true},
		{"other causes only", refusal(metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid}), false},
		{"no causes", refusal(), false},
		{"no details", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden}}, false},
		{"not an API error", errors.New(string(CauseNodeState)), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := IsNodeStateRefusal(tt.err); got != tt.want {
			t.Errorf("%s: IsNodeStateRefusal = %v, want %v", tt.name, got, tt.want)
		}
	}
}
