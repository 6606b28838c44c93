package server

import (
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
			got, err := readBody(r, tc.max)
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
