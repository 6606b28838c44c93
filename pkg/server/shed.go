package server

import (
	"encoding/json"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ShedFunc answers a review request that was shed rather than decided.
// head is at most ShedPeekBytes of the request body, to echo what the
// answer must (an AdmissionReview's request UID); message says why the
// request was shed. It returns the JSON answer, or ok false when no
// well-formed review can be made, and the client gets HTTP 429 instead.
//
// The answers are about the transport, not about what a review means: a
// shed review is one nobody decided.
type ShedFunc func(head io.Reader, message string) (response []byte, ok bool)

// ShedPeekBytes is how much of a shed request's body a ShedFunc may read.
// The apiserver encodes an AdmissionReview's request UID within its first
// hundred bytes, before the objects.
const ShedPeekBytes = 4 << 10

// ShedSubjectAccessReview answers a shed SubjectAccessReview with no
// opinion and the message as its evaluation error. The apiserver reads no
// opinion as its other authorizers' turn (and, as shipped, does not cache
// it), where any answer that is not a SubjectAccessReview
// would fail the node's request outright.
func ShedSubjectAccessReview(_ io.Reader, message string) ([]byte, bool) {
	body, err := json.Marshal(&authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"},
		Status: authorizationv1.SubjectAccessReviewStatus{
			Reason:          "nodeguard webhook overloaded",
			EvaluationError: message,
		},
	})
	return body, err == nil
}

// ShedAdmissionReview answers a shed AdmissionReview with allowed false
// and a 429 status carrying the message, which the apiserver passes on to
// the client as Too Many Requests. The apiserver refuses an answer whose
// UID is not the request's, so without a UID in the head of the body there
// is no well-formed answer.
func ShedAdmissionReview(head io.Reader, message string) ([]byte, bool) {
	uid, ok := peekAdmissionUID(head)
	if !ok {
		return nil, false
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{
			UID:     types.UID(uid),
			Allowed: false,
			Result: &metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusTooManyRequests,
				Reason:  metav1.StatusReasonTooManyRequests,
				Message: message,
			},
		},
	})
	return body, err == nil
}

// peekAdmissionUID finds request.uid in the head of an AdmissionReview by
// walking its tokens, so that a body cut short after the UID still yields
// it and nothing beyond the head is decoded.
func peekAdmissionUID(head io.Reader) (string, bool) {
	dec := json.NewDecoder(head)
	if !enterObject(dec) {
		return "", false
	}
	for dec.More() {
		key, ok := nextKey(dec)
		if !ok {
			return "", false
		}
		if key != "request" {
			if !skipValue(dec) {
				return "", false
			}
			continue
		}
		if !enterObject(dec) {
			return "", false
		}
		for dec.More() {
			key, ok := nextKey(dec)
			if !ok {
				return "", false
			}
			if key == "uid" {
				tok, err := dec.Token()
				uid, isString := tok.(string)
				return uid, err == nil && isString && uid != ""
			}
			if !skipValue(dec) {
				return "", false
			}
		}
		return "", false
	}
	return "", false
}

func enterObject(dec *json.Decoder) bool {
	tok, err := dec.Token()
	return err == nil && tok == json.Delim('{')
}

func nextKey(dec *json.Decoder) (string, bool) {
	tok, err := dec.Token()
	key, ok := tok.(string)
	return key, err == nil && ok
}

// skipValue consumes one value, however deeply nested.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}
