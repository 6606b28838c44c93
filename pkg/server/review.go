package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"
)

// What the two review endpoints (validate.go, authorize.go) share: reading
// the request, decoding strictly, and writing the answer.

// ReviewOption adds to what a review endpoint does beside deciding.
type ReviewOption func(*reviewOptions)

type reviewOptions struct {
	metrics     *DecisionMetrics
	decisionLog DecisionLog
}

// WithMetrics counts and times the decisions in m.
func WithMetrics(m *DecisionMetrics) ReviewOption {
	return func(o *reviewOptions) { o.metrics = m }
}

// WithDecisionLog logs one structured line per decision that l selects.
func WithDecisionLog(l DecisionLog) ReviewOption {
	return func(o *reviewOptions) { o.decisionLog = l }
}

// readReview reads a review request: POST with a JSON body of at most
// maxBodyBytes. The apiserver's ?timeout= becomes the deadline of ctx;
// call cancel when done. When ok is false the request has been answered
// with an HTTP error.
func readReview(w http.ResponseWriter, r *http.Request, maxBodyBytes int64) (ctx context.Context, cancel context.CancelFunc, body []byte, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "%s accepts only POST", r.URL.Path)
		return nil, nil, nil, false
	}
	if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/json" {
		httpError(w, http.StatusBadRequest, "%s expects Content-Type application/json, got %q", r.URL.Path, r.Header.Get("Content-Type"))
		return nil, nil, nil, false
	}
	body, err := readBody(r, maxBodyBytes)
	if errors.Is(err, errBodyTooLarge) {
		httpError(w, http.StatusRequestEntityTooLarge, "request body exceeds the limit of %d bytes", maxBodyBytes)
		return nil, nil, nil, false
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return nil, nil, nil, false
	}
	ctx, cancel = context.WithCancel(r.Context())
	if t := r.URL.Query().Get("timeout"); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			cancel()
			httpError(w, http.StatusBadRequest, "invalid timeout %q: want a positive duration such as 10s", t)
			return nil, nil, nil, false
		}
		cancel()
		ctx, cancel = context.WithTimeout(r.Context(), d)
	}
	return ctx, cancel, body, true
}

// badReview answers a body that is not a review the endpoint can answer at
// all (malformed, wrong API version or kind): anything decided about a
// well-formed review, refusals and internal failures included, is an
// answer instead, because the apiserver can act on a review but not on an
// HTTP error.
func badReview(ctx context.Context, w http.ResponseWriter, err error) {
	klog.FromContext(ctx).V(2).Info("Rejected malformed review", "err", err)
	httpError(w, http.StatusBadRequest, "%v", err)
}

// writeReview answers with the review as JSON.
func writeReview(ctx context.Context, w http.ResponseWriter, review any) {
	answer, err := json.Marshal(review)
	if err != nil {
		// The server's fault, not the request's.
		klog.FromContext(ctx).Error(err, "Answering a review")
		httpError(w, http.StatusInternalServerError, "encoding the review response: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(append(answer, '\n')); err != nil {
		klog.FromContext(ctx).Error(err, "Writing review response")
	}
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", args...)
}

// decodeStrict decodes body into v case-sensitively, as the apiserver's own
// decoder does. Fields this build does not know are let through, since a
// newer apiserver may send them. A repeated key is not an error but
// repeated: a reader that kept the first value would see another request
// than one that kept the last, so the review is answered but never decided.
func decodeStrict(body []byte, v any) (repeated error, err error) {
	strict, err := sigsjson.UnmarshalStrict(body, v, sigsjson.DisallowDuplicateFields)
	return errors.Join(strict...), err
}

// checkKind refuses a review that is not of kind gvk.
func checkKind(tm metav1.TypeMeta, gvk schema.GroupVersionKind) error {
	if tm.GroupVersionKind() != gvk {
		return fmt.Errorf("expected %s %s, got apiVersion %q kind %q", gvk.GroupVersion(), gvk.Kind, tm.APIVersion, tm.Kind)
	}
	return nil
}

// errBodyTooLarge is readBody's answer to a body over the limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads a request body of at most maxBytes. A declared length over
// the limit is refused before anything is read, and a body is never read
// past the limit.
func readBody(r *http.Request, maxBytes int64) ([]byte, error) {
	if r.ContentLength > maxBytes {
		return nil, errBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, errBodyTooLarge
	}
	if r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
		return nil, fmt.Errorf("reading request body: got %d bytes of the %d declared", len(body), r.ContentLength)
	}
	return body, nil
}
