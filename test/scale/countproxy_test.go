package scale

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The controller's client reaches the proxy over HTTPS with HTTP/2, as it
// reaches an apiserver, and the proxy counts and forwards what it sends.
func TestCountingProxySpeaksHTTP2(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`))
	}))
	defer upstream.Close()
	proxy, err := startCountingProxy(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.stop()
	proxy.start()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: proxy.url, TLSClientConfig: rest.TLSClientConfig{CAData: proxy.caData}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{}); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if got := proxy.snapshot(); got["get nodes"] != 1 {
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
	p := &countingProxy{patches: map[string]wireTiming{}, on: true}
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	p.timePatch("n", wireTiming{sent: at(10), answered: at(20)})
	p.timePatch("n", wireTiming{sent: at(30), answered: at(40)})
	if got := p.patchTimings()["n"]; !got.first.Equal(at(10)) || !got.sent.Equal(at(30)) || !got.answered.Equal(at(40)) {
		t.Errorf("timing = %+v, want first 10, sent 30, answered 40", got)
	}
}
