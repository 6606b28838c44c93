package scale

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// countingProxy sits between the rollout controller and the apiserver and
// counts its requests by verb and resource. The apiserver's
// apiserver_request_total has no user label, and the controller's
// rest_client metrics have no resource, so counting on the wire is the
// only count of the controller's requests alone. It serves HTTPS with
// HTTP/2, as the apiserver does: the controller's client then sends every
// request over one connection, as it would to the apiserver, where plain
// HTTP/1.1 would open a connection per request in flight (hundreds in a
// wave) and time the dialing as the controller's.
type countingProxy struct {
	server *http.Server
	url    string
	// caData is the PEM of the proxy's self-signed serving certificate,
	// for the controller's kubeconfig.
	caData []byte

	mu     sync.Mutex
	counts map[string]int
	// rejected counts the requests the apiserver answered 429 (priority
	// and fairness turning them away, which client-go sends again after
	// the Retry-After), by the same key, an assignment's apart.
	rejected map[string]int
	// levels counts the controller's requests by the priority level the
	// apiserver's priority and fairness put them in, by its UID (the
	// X-Kubernetes-PF-PriorityLevel-UID header of the answer).
	levels map[string]int
	// protos counts the controller's requests by protocol (HTTP/2.0).
	protos map[string]int
	on     bool
	// patches time each Node's latest patch on the wire, by Node name.
	patches map[string]wireTiming
	// nodeEvents are the Node watch events passed to the controller.
	nodeEvents *deliveries
}

// wireTiming is when the proxy received a request from the controller and
// when it had passed the apiserver's whole answer back; first is when it
// received the first of the Node's timed patches, which differs from sent
// when the Node moved before that one applied and the controller patched
// again.
type wireTiming struct {
	First    time.Time `json:"first"`
	Sent     time.Time `json:"sent"`
	Answered time.Time `json:"answered"`
}

// startCountingProxy serves plain HTTP on loopback and forwards to the
// apiserver of upstream over TLS with upstream's credentials (the
// controller's ServiceAccount token), so that the apiserver authorizes
// every request as the controller's.
func startCountingProxy(upstream *rest.Config) (*countingProxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("counting proxy: %w", err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("counting proxy: transport: %w", err)
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		return nil, fmt.Errorf("counting proxy: serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("counting proxy: serving certificate: %w", err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("counting proxy: listening: %w", err)
	}
	p := &countingProxy{url: "https://" + l.Addr().String(), caData: certPEM, counts: map[string]int{}, rejected: map[string]int{}, levels: map[string]int{}, protos: map[string]int{}, patches: map[string]wireTiming{}, nodeEvents: newDeliveries()}
	rp := &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:      transport,
		FlushInterval:  -1, // watches stream
		ModifyResponse: p.tapNodeWatch,
	}
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent := time.Now()
		key, node := p.count(r)
		if node != "" && !assigns(r) {
			// Only an assignment (or a revert) is what a reaction waits
			// for; the controller's other Node patches (its trial-passed
			// mark) are counted, not timed.
			node = ""
		}
		if node != "" {
			key += " (assignment)"
		}
		rp.ServeHTTP(&answers{ResponseWriter: w, answered: func(code int, level string) { p.answered(key, code, level) }}, r)
		if node != "" {
			p.timePatch(node, wireTiming{Sent: sent, Answered: time.Now()})
		}
	})}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

// count files the request under "VERB resource[/subresource]", with
// Kubernetes' verbs: a GET with watch=true is a watch, a GET of a
// collection a list. It returns that key, and the Node's name when the
// request patches a Node's metadata (an assignment or a revert).
func (p *countingProxy) count(r *http.Request) (key, node string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/... or /apis/GROUP/VERSION/...
	if len(parts) > 0 && parts[0] == "apis" && len(parts) >= 3 {
		parts = parts[3:]
	} else if len(parts) >= 2 {
		parts = parts[2:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	resource, named, sub := "", false, ""
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		named = true
	}
	if len(parts) > 2 {
		sub = "/" + parts[2]
	}
	verb := strings.ToLower(r.Method)
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		verb = "watch"
	case r.Method == http.MethodGet && !named:
		verb = "list"
	case r.Method == http.MethodPut:
		verb = "update"
	case r.Method == http.MethodPost:
		verb = "create"
	}
	key = verb + " " + resource + sub
	p.mu.Lock()
	if p.on {
		p.counts[key]++
	}
	p.protos[r.Proto]++
	p.mu.Unlock()
	if verb == "patch" && resource == "nodes" && named && sub == "" {
		return key, parts[1]
	}
	return key, ""
}

// answered counts an answer of 429 by the request's key, and every answer
// by its priority level.
func (p *countingProxy) answered(key string, code int, level string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	if code == http.StatusTooManyRequests {
		p.rejected[key]++
	}
	if level != "" {
		p.levels[level]++
	}
}

// answers passes the status and the priority level of an answer to
// answered as its header goes out, before the client can have it. Unwrap
// lets the reverse proxy flush a watch through it.
type answers struct {
	http.ResponseWriter
	answered func(code int, level string)
}

func (a *answers) WriteHeader(code int) {
	a.answered(code, a.Header().Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID))
	a.ResponseWriter.WriteHeader(code)
}

func (a *answers) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// tapNodeWatch times the events of the controller's Node watches as they
// pass (tapWatch); other answers, and a watch compressed any other way
// than gzip, pass untouched.
func (p *countingProxy) tapNodeWatch(resp *http.Response) error {
	r := resp.Request
	if r.Method != http.MethodGet || r.URL.Query().Get("watch") != "true" || resp.StatusCode != http.StatusOK ||
		!strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/api/v1/nodes") {
		return nil
	}
	enc := resp.Header.Get("Content-Encoding")
	if enc != "" && enc != "gzip" {
		return nil
	}
	resp.Body = tapWatch(resp.Body, p.nodeEvents, resp.Header.Get("Content-Type"), enc == "gzip")
	return nil
}

// assigns reports whether the request's body sets a Node's config-source
// (an assignment or a revert); it puts the body back for the proxy to
// send. The controller sends a JSON patch guarded by tests of the Node's
// whole annotations, which name config-source too: there only an add of
// it counts. A merge patch (the controller's fallback) sets it by naming
// it.
func assigns(r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	if r.Header.Get("Content-Type") != string(types.JSONPatchType) {
		return bytes.Contains(body, []byte(`"`+contract.ConfigSourceAnnotation+`"`))
	}
	var ops []struct{ Op, Path string }
	if json.Unmarshal(body, &ops) != nil {
		return false
	}
	path := "/metadata/annotations/" + strings.ReplaceAll(contract.ConfigSourceAnnotation, "/", "~1")
	return slices.ContainsFunc(ops, func(op struct{ Op, Path string }) bool {
		return op.Path == path && (op.Op == "add" || op.Op == "replace" || op.Op == "remove")
	})
}

func (p *countingProxy) timePatch(node string, t wireTiming) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		t.First = t.Sent
		if earlier, ok := p.patches[node]; ok {
			t.First = earlier.First
		}
		p.patches[node] = t
	}
}

// start begins counting from zero.
func (p *countingProxy) start() {
	p.mu.Lock()
	p.counts, p.rejected, p.levels, p.patches, p.on = map[string]int{}, map[string]int{}, map[string]int{}, map[string]wireTiming{}, true
	p.mu.Unlock()
	p.nodeEvents.start()
}

func (p *countingProxy) stop() { _ = p.server.Close() }
