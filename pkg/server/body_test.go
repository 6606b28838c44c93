package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name          string
		body          string
		contentLength int64 // -1: unknown
		max           int64
		want          string
		wantTooLarge  bool
		wantErr       bool
	}{
		{name: "declared length", body: `{"a":1}`, contentLength: 7, max: 100, want: `{"a":1}`},
		{name: "empty", body: "", contentLength: 0, max: 100, want: ""},
		{name: "at the limit", body: "12345", contentLength: 5, max: 5, want: "12345"},
		{name: "declared over the limit", body: "123456", contentLength: 6, max: 5, wantTooLarge: true},
		{name: "unknown length within the limit", body: "12345", contentLength: -1, max: 5, want: "12345"},
		{name: "unknown length over the limit", body: "123456", contentLength: -1, max: 5, wantTooLarge: true},
		{name: "shorter than declared", body: "123", contentLength: 5, max: 100, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/validate", io.NopCloser(strings.NewReader(tc.body)))
			r.ContentLength = tc.contentLength
			got, err := readBody(r, tc.max, nil)
			switch {
			case tc.wantTooLarge:
				if !errors.Is(err, errBodyTooLarge) {
					t.Fatalf("readBody = %q, %v; want errBodyTooLarge", got, err)
				}
			case tc.wantErr:
				if err == nil || errors.Is(err, errBodyTooLarge) {
					t.Fatalf("readBody = %q, %v; want a read error", got, err)
				}
			case err != nil || string(got) != tc.want:
				t.Fatalf("readBody = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestBodyPool(t *testing.T) {
	var nilPool *bodyPool
	if b := nilPool.get(10); len(b) != 10 {
		t.Fatalf("nil pool get(10) = %d bytes", len(b))
	}
	nilPool.put(make([]byte, 10)) // no panic

	p := &bodyPool{poison: true}
	b := p.get(100)
	copy(b, "secret")
	p.put(b)
	if string(b[:6]) != "XXXXXX" {
		t.Fatalf("a returned buffer still holds %q", b[:6])
	}
	// A buffer too small for the next body is not handed out for it.
	if got := p.get(1000); len(got) != 1000 {
		t.Fatalf("get(1000) = %d bytes", len(got))
	}
	big := make([]byte, maxPooledBody+1)
	p.put(big)
	if big[0] == 'X' {
		t.Fatal("a buffer over maxPooledBody was taken into the pool")
	}
}

// TestReviewHandlerReusesBodies: with ReuseBodies, the body a review
// function saw is the pool's again once the handler has answered (here
// poisoned, as a view kept past the return would see it), and the answer
// written was made before that.
func TestReviewHandlerReusesBodies(t *testing.T) {
	var kept []byte
	h := ReviewHandler("test", 1<<10, func(_ context.Context, body []byte) (any, error) {
		kept = body
		return map[string]string{"echo": string(body)}, nil
	}, reuseBodiesPoisoned())
	for _, payload := range []string{`{"first":1}`, `{"second":2}`} {
		req := httptest.NewRequest(http.MethodPost, "/r", strings.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), strings.ReplaceAll(payload, `"`, `\"`)) {
			t.Fatalf("answer %d %s for %s", rec.Code, rec.Body, payload)
		}
		if string(kept) != strings.Repeat("X", len(payload)) {
			t.Fatalf("after the answer, the body reads %q: it was not given back", kept)
		}
	}
}
