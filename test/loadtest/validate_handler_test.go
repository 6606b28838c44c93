package loadtest

import (
	"net/http"
	"slices"
	"testing"

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
	floor := FloorHandler(AdmissionFloorResponse)
	ours := server.Validate(newValidateAdmitter(b, benchShape), nil, validateMaxBody)
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
			b.Run(name+"/"+h.label, func(b *testing.B) { serveOnFreshGoroutines(b, h.handler, "/validate?timeout=10s", bodies[name]) })
		}
	}
}
