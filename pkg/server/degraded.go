package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Degradable reports a condition that does not make the server unready but
// that an operator must see, such as a configuration reload that failed
// while the last good configuration stays in force. Degraded returns ""
// when all is well.
type Degradable interface {
	Name() string
	Degraded() string
}

// withDegradedDetail adds a "[!]name degraded: detail" line per degraded
// reporter to the verbose output of a health endpoint, before its final
// line, leaving the status code to the health checks.
func withDegradedDetail(next http.Handler, reporters []Degradable) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("verbose") || len(reporters) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		var lines []string
		for _, d := range reporters {
			if detail := d.Degraded(); detail != "" {
				lines = append(lines, fmt.Sprintf("[!]%s degraded: %s", d.Name(), detail))
			}
		}
		if len(lines) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		last := bytes.LastIndexByte(bytes.TrimRight(body, "\n"), '\n') + 1
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body[:last])
		_, _ = w.Write([]byte(strings.Join(lines, "\n") + "\n"))
		_, _ = w.Write(body[last:])
	})
}
