package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"k8s.io/klog/v2"
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
		answer, err := decide(klog.NewContext(ctx, logger), review, body)
		var encoding errEncoding
		switch {
		case errors.As(err, &encoding):
			logger.Error(err, "Answering a review")
			httpError(w, http.StatusInternalServerError, "%v", err)
			return
		case err != nil:
			logger.V(2).Info("Rejected malformed review", "err", err)
			httpError(w, http.StatusBadRequest, "%v", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(answer); err != nil {
			logger.Error(err, "Writing review response")
		}
	})
}

// errEncoding marks an answer that could not be encoded, which is the
// server's fault, not the request's.
type errEncoding struct{ err error }

func (e errEncoding) Error() string { return "encoding the review response: " + e.err.Error() }

// decide reviews body and encodes the answer.
func decide(ctx context.Context, review ReviewFunc, body []byte) ([]byte, error) {
	response, err := review(ctx, body)
	if err != nil {
		return nil, err
	}
	answer, err := json.Marshal(response)
	if err != nil {
		return nil, errEncoding{err}
	}
	return append(answer, '\n'), nil
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", args...)
}
