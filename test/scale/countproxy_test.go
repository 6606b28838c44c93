package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

// proxyTo starts a counting proxy, counting, in front of a TLS server
// answering every request with handler.
func proxyTo(t *testing.T, handler http.HandlerFunc) *countingProxy {
	t.Helper()
	upstream := httptest.NewTLSServer(handler)
	t.Cleanup(upstream.Close)
	proxy, err := startCountingProxy(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.stop)
	proxy.start()
	return proxy
}

// serveNode answers every request with the Node n.
func serveNode(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`))
}

// The controller's client reaches the proxy over HTTPS with HTTP/2, as it
// reaches an apiserver, and the proxy counts and forwards what it sends.
func TestCountingProxySpeaksHTTP2(t *testing.T) {
	proxy := proxyTo(t, serveNode)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: proxy.url, TLSClientConfig: rest.TLSClientConfig{CAData: proxy.caData}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{}); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if got := proxy.record().Counts; got["get nodes"] != 1 {
		t.Errorf("counts = %v, want one get nodes", got)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if proxy.protos["HTTP/2.0"] != 1 {
		t.Errorf("requests by protocol = %v, want one over HTTP/2.0", proxy.protos)
	}
}

// A Node patched again after a conflict keeps the time of its first patch
// beside the one that applied.
func TestTimePatchKeepsTheFirst(t *testing.T) {
	p := &countingProxy{patches: map[string]wireTiming{}, on: true, nodeEvents: newDeliveries()}
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	p.timePatch("n", wireTiming{Sent: at(10), Answered: at(20)})
	p.timePatch("n", wireTiming{Sent: at(30), Answered: at(40)})
	if got := p.record().Patches["n"]; !got.First.Equal(at(10)) || !got.Sent.Equal(at(30)) || !got.Answered.Equal(at(40)) {
		t.Errorf("timing = %+v, want first 10, sent 30, answered 40", got)
	}
}

// The harness drives the proxy's process through the addresses it prints:
// requests before the count starts are not counted, those after are, and
// the record carries them back.
func TestCountingProxyControl(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(serveNode))
	defer upstream.Close()
	kubeconfig := filepath.Join(t.TempDir(), "upstream.kubeconfig")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	if err := controlplane.WriteKubeconfig(kubeconfig, &rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	out, in := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- ServeCountingProxy(ctx, kubeconfig, in) }()
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading the proxy's addresses: %v", err)
	}
	p := &proxyProcess{client: http.DefaultClient}
	if err := json.Unmarshal(line, &p.proxyAddresses); err != nil {
		t.Fatalf("the proxy's addresses %q: %v", line, err)
	}
	client, err := kubernetes.NewForConfig(&rest.Config{Host: p.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	get := func() {
		if _, err := client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatalf("through the proxy: %v", err)
		}
	}
	get()
	if err := p.start(ctx); err != nil {
		t.Fatal(err)
	}
	get()
	get()
	rec, err := p.record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Counts["get nodes"] != 2 {
		t.Errorf("counts = %v, want the two gets after the start", rec.Counts)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("the proxy ended with %v, want nil once cancelled", err)
	}
}

// Deliveries keep their resourceVersions and times through the record's
// JSON, to the nanosecond.
func TestProxyRecordCarriesDeliveries(t *testing.T) {
	at := time.Unix(100, 123456789)
	p := &countingProxy{counts: map[string]int{}, protos: map[string]int{}, patches: map[string]wireTiming{}, nodeEvents: newDeliveries()}
	p.start()
	p.nodeEvents.record("a", 12, at)
	raw, err := json.Marshal(p.record())
	if err != nil {
		t.Fatal(err)
	}
	var rec proxyRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if got, m := rec.nodeEvents().lookup("a", "12"); m != matchExact || !got.Equal(at) {
		t.Errorf("lookup after the round trip = %v, %v; want %v, exact", got, m, at)
	}
}

// An assignment is a patch that sets config-source: in the controller's
// guarded JSON patch an add of it, not the test of the annotations that
// names it; in a merge patch, naming it.
func TestAssignsReadsTheControllersPatches(t *testing.T) {
	key := strings.ReplaceAll(contract.ConfigSourceAnnotation, "/", "~1")
	tests := `{"op":"test","path":"/metadata/annotations","value":{"` + contract.ConfigSourceAnnotation + `":"a/b"}}`
	for _, tc := range []struct {
		typ, body string
		want      bool
	}{
		{"application/json-patch+json", `[` + tests + `,{"op":"add","path":"/metadata/annotations/` + key + `","value":"a/c"}]`, true},
		{"application/json-patch+json", `[` + tests + `,{"op":"remove","path":"/metadata/annotations/nodeguard.dev~1trial-passed"}]`, false},
		{"application/merge-patch+json", `{"metadata":{"annotations":{"` + contract.ConfigSourceAnnotation + `":"a/c"}}}`, true},
		{"application/merge-patch+json", `{"metadata":{"annotations":{"nodeguard.dev/trial-passed":"x"}}}`, false},
	} {
		r := httptest.NewRequest(http.MethodPatch, "/api/v1/nodes/n", strings.NewReader(tc.body))
		r.Header.Set("Content-Type", tc.typ)
		if got := assigns(r); got != tc.want {
			t.Errorf("assigns(%s %s) = %v, want %v", tc.typ, tc.body, got, tc.want)
		}
		if rest, _ := io.ReadAll(r.Body); string(rest) != tc.body {
			t.Errorf("the body left to send is %q, want it whole", rest)
		}
	}
}

// A request the apiserver turns away with 429 is counted rejected under
// its key, beside its count.
func TestCountingProxyCountsRejections(t *testing.T) {
	proxy := proxyTo(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
	})
	transport, err := rest.TransportFor(&rest.Config{Host: proxy.url, TLSClientConfig: rest.TLSClientConfig{CAData: proxy.caData}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: transport}).Get(proxy.url + "/api/v1/nodes/n")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d through the proxy, want 429", resp.StatusCode)
	}
	if rec := proxy.record(); rec.Counts["get nodes"] != 1 || rec.Rejected["get nodes"] != 1 {
		t.Errorf("counts %v, rejected %v; want one get nodes, rejected", rec.Counts, rec.Rejected)
	}
}
