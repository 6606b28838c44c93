package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echoReview is a review endpoint that answers what it read: the body,
// and whether the request has a deadline.
func echoReview(maxBodyBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel, body, ok := readReview(w, r, maxBodyBytes)
		if !ok {
			return
		}
		defer cancel()
		if string(body) == "bad" {
			badReview(ctx, w, errors.New("not a review"))
			return
		}
		deadline, ok := ctx.Deadline()
		writeReview(ctx, w, map[string]any{"body": string(body), "hasDeadline": ok, "deadlineSoon": ok && time.Until(deadline) < time.Minute})
	})
}

func TestReviewHandler(t *testing.T) {
	h := echoReview(16)
	tests := []struct {
		name        string
		method      string
		contentType string
		target      string
		body        string
		wantCode    int
		wantBody    string
	}{
		{"ok", http.MethodPost, "application/json", "/r", `{}`, 200, `"body":"{}"`},
		{"content type with charset", http.MethodPost, "application/json; charset=utf-8", "/r", `{}`, 200, `"hasDeadline":false`},
		{"timeout becomes a deadline", http.MethodPost, "application/json", "/r?timeout=10s", `{}`, 200, `"deadlineSoon":true`},
		{"bad timeout", http.MethodPost, "application/json", "/r?timeout=soon", `{}`, 400, `invalid timeout "soon"`},
		{"GET", http.MethodGet, "application/json", "/r", ``, 405, "accepts only POST"},
		{"wrong content type", http.MethodPost, "application/yaml", "/r", `{}`, 400, "expects Content-Type application/json"},
		{"no content type", http.MethodPost, "", "/r", `{}`, 400, "expects Content-Type application/json"},
		{"oversize body", http.MethodPost, "application/json", "/r", strings.Repeat("x", 17), 413, "exceeds the limit of 16 bytes"},
		{"review error", http.MethodPost, "application/json", "/r", `bad`, 400, "not a review"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}
