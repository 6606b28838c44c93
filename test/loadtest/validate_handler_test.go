package loadtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/server"
)

// BenchmarkValidateHandler is the /validate handler alone, next to the
// floor's, for the requests of BenchmarkValidate: what nodeguard adds per
// request without TLS, HTTP framing or a client, steadier than the load
// runs on a shared machine. Each request runs on a fresh goroutine, as the
// HTTP/2 server runs them.
func BenchmarkValidateHandler(b *testing.B) {
	bodies := map[string][][]byte{}
	for name, body := range validateBodies(b) {
		bodies[name+" (repeated)"] = [][]byte{body}
	}
	bodies["ConfigMap update (new content each time)"] = uniqueConfigMapUpdates(b, 4*kubeletconfig.DefaultCheckerEntries)
	floor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(validateFloorResponse))
	})
	ours := server.ReviewHandler("validate", validateMaxBody, admission.ReviewFunc(newValidateAdmitter(b, benchShape), nil))
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range bodies {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, h := range []struct {
			label   string
			handler http.Handler
		}{{"floor", floor}, {"nodeguard", ours}} {
			b.Run(name+"/"+h.label, func(b *testing.B) {
				b.ReportAllocs()
				codes := make(chan int)
				for i := 0; b.Loop(); i++ {
					body := bodies[name][i%len(bodies[name])]
					go func() {
						req := httptest.NewRequest(http.MethodPost, "/validate?timeout=10s", bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						rec := httptest.NewRecorder()
						h.handler.ServeHTTP(rec, req)
						codes <- rec.Code
					}()
					if code := <-codes; code != http.StatusOK {
						b.Fatalf("status %d", code)
					}
				}
			})
		}
	}
}
