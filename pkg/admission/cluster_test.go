package admission

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAPIAudiencesFromDiscovery: without --api-audiences, the apiserver's
// default audience is its service account issuer, read once from its
// discovery document; a failed read is tried again.
func TestAPIAudiencesFromDiscovery(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/.well-known/openid-configuration" || fail.Load() {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"issuer":"https://issuer.example","jwks_uri":"https://issuer.example/keys"}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := NewAPICluster(client, nil)
	if _, err := c.APIAudiences(t.Context()); err == nil {
		t.Fatal("a failed read gave audiences")
	}
	fail.Store(false)
	for range 2 {
		got, err := c.APIAudiences(t.Context())
		if err != nil || !slices.Equal(got, []string{"https://issuer.example"}) {
			t.Fatalf("got %v, %v", got, err)
		}
	}
	if n := calls.Load(); n < 2 || n > 3 {
		t.Fatalf("%d requests: the issuer is not cached once read", n)
	}
	if got, _ := NewAPICluster(client, []string{"a", "b"}).APIAudiences(t.Context()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("--api-audiences: got %v", got)
	}
}
