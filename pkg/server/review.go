package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"io"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"
)

// ReviewFunc turns a review request body into a response. It returns an
// error only when the body is not a review it can answer at all (malformed,
// wrong API version or kind); anything decided about a well-formed review,
// refusals and internal failures included, belongs in the response, because
// the apiserver can act on a review but not on an HTTP error.
type ReviewFunc func(ctx context.Context, body []byte) (response any, err error)

// ReviewHandler serves one review endpoint: POST with a JSON body of at
// most maxBodyBytes, answered with JSON. The apiserver's ?timeout= becomes
// the context deadline.
func ReviewHandler(name string, maxBodyBytes int64, review ReviewFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context()).WithValues("endpoint", name)
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			httpError(w, http.StatusMethodNotAllowed, "%s accepts only POST", r.URL.Path)
			return
		}
		if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/json" {
			httpError(w, http.StatusBadRequest, "%s expects Content-Type application/json, got %q", r.URL.Path, r.Header.Get("Content-Type"))
			return
		}
		body, err := readBody(r, maxBodyBytes)
		if err != nil {
			if errors.Is(err, errBodyTooLarge) {
				httpError(w, http.StatusRequestEntityTooLarge, "request body exceeds the limit of %d bytes", maxBodyBytes)
				return
			}
			httpError(w, http.StatusBadRequest, "%v", err)
			return
		}
		ctx := r.Context()
		if t := r.URL.Query().Get("timeout"); t != "" {
			d, err := time.ParseDuration(t)
			if err != nil || d <= 0 {
				httpError(w, http.StatusBadRequest, "invalid timeout %q: want a positive duration such as 10s", t)
				return
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		response, err := review(klog.NewContext(ctx, logger), body)
		if err != nil {
			logger.V(2).Info("Rejected malformed review", "err", err)
			httpError(w, http.StatusBadRequest, "%v", err)
			return
		}
		answer, err := json.Marshal(response)
		if err != nil {
			// The server's fault, not the request's.
			logger.Error(err, "Answering a review")
			httpError(w, http.StatusInternalServerError, "encoding the review response: %v", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(append(answer, '\n')); err != nil {
			logger.Error(err, "Writing review response")
		}
	})
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", args...)
}

// ReviewOption adds to what a review (AdmissionReview, SubjectAccessReview)
// does beside deciding.
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

// failure is why deciding a review did not finish.
type failure int

const (
	panicked failure = iota
	deadlinePassed
)

// review is what every review endpoint does with a body, in one order:
// decode it strictly, decide it safely (the built-in rules, then the
// policies), observe the decision (metrics, logs), and encode the answer.
// R is the decoded review and O the decision; an endpoint supplies the
// typed steps (validate.go, authorize.go).
type review[R, O any] struct {
	// kind names the review for logs, with its article.
	kind string
	// decode returns an error for a body that is not a review this
	// endpoint answers at all; a repeated key is not such an error but
	// repeated, which is answered by malformed and never decided.
	decode    func(body []byte) (r R, repeated error, err error)
	malformed func(r R, repeated error) O
	// failed answers a review whose decision panicked or whose deadline
	// passed first.
	failed  func(r R, why failure) O
	builtin func(ctx context.Context, r R) O
	// policies judge what the built-in rules decided; nil when there are
	// none.
	policies func(ctx context.Context, r R, builtin O) O
	// observe records the decision in metrics and debug logs; logLine is
	// the decision log's line for it, when denied or sampled.
	observe func(ctx context.Context, r R, out O, took time.Duration)
	denied  func(out O) bool
	logLine func(ctx context.Context, r R, out O, took time.Duration)
	encode  func(r R, out O) any
	// who names the review in the log of a recovered panic.
	who func(r R) []any

	decisionLog DecisionLog
}

// answer is the ReviewFunc of r.
func (rv *review[R, O]) answer(ctx context.Context, body []byte) (any, error) {
	r, repeated, err := rv.decode(body)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var out O
	if repeated == nil {
		out = rv.decideSafely(ctx, r)
	} else {
		// The apiserver never repeats a key.
		out = rv.malformed(r, repeated)
	}
	took := time.Since(start)
	rv.observe(ctx, r, out, took)
	if rv.decisionLog.Logs(rv.denied(out)) {
		rv.logLine(ctx, r, out, took)
	}
	return rv.encode(r, out), nil
}

// decideSafely decides with the built-in rules, then with the policies; a
// panic in either, or a deadline passed before deciding, is answered by
// failed, since the apiserver can act on a review but not on an HTTP error.
func (rv *review[R, O]) decideSafely(ctx context.Context, r R) (out O) {
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Recovered while deciding "+rv.kind, rv.who(r)...)
			out = rv.failed(r, panicked)
		}
	}()
	if ctx.Err() != nil {
		return rv.failed(r, deadlinePassed)
	}
	out = rv.builtin(ctx, r)
	if rv.policies != nil {
		out = rv.policies(ctx, r, out)
	}
	return out
}

// decodeStrict decodes body into v case-sensitively, as the apiserver's own
// decoder does. Fields this build does not know are let through, since a
// newer apiserver may send them. A repeated key is not an error but one of
// strict: a reader that kept the first value would see another request
// than one that kept the last.
func decodeStrict(body []byte, v any) (strict []error, err error) {
	return sigsjson.UnmarshalStrict(body, v, sigsjson.DisallowDuplicateFields)
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
