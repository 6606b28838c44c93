package authz

import (
	"errors"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/json"
)

// decodeReview decodes a SubjectAccessReview case-sensitively, as the
// apiserver's own decoder does; fields this build does not know are let
// through, since a newer apiserver may send them. A repeated key anywhere
// in the review is not an error here but a refusal (repeated), since a
// reader that kept the first value would see another request than one
// that kept the last.
func decodeReview(body []byte) (sar *authorizationv1.SubjectAccessReview, repeated error, err error) {
	sar = &authorizationv1.SubjectAccessReview{}
	strict, err := json.UnmarshalStrict(body, sar, json.DisallowDuplicateFields)
	if err != nil {
		return nil, nil, err
	}
	return sar, errors.Join(strict...), nil
}
