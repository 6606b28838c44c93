package reviewtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
)

// Serve calls the review endpoint h with body as the apiserver would (POST,
// application/json, ctx as the request's context): an HTTP error is an
// error, and an answer is its JSON.
func Serve(ctx context.Context, h http.Handler, body []byte) (json.RawMessage, error) {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/review", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", w.Code, w.Body)
	}
	return w.Body.Bytes(), nil
}
