package program

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A client built from WithContentType asks for protobuf first, and still
// reads a JSON answer (what the apiserver sends where it has no protobuf);
// the config it was copied from is left as it was.
func TestWithContentTypeAsksForProtobuf(t *testing.T) {
	var accept string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`))
	}))
	defer server.Close()
	base := &rest.Config{Host: server.URL}
	client, err := kubernetes.NewForConfig(WithContentType(base, runtime.ContentTypeProtobuf))
	if err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if err != nil || node.Name != "n" {
		t.Fatalf("Get = %v, %v; want Node n", node, err)
	}
	if want := runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON; accept != want {
		t.Errorf("Accept = %q, want %q", accept, want)
	}
	if base.ContentType != "" || base.AcceptContentTypes != "" {
		t.Errorf("the base config was changed: %q, %q", base.ContentType, base.AcceptContentTypes)
	}
	if got := WithContentType(base, runtime.ContentTypeJSON).AcceptContentTypes; got != runtime.ContentTypeJSON {
		t.Errorf("JSON accepts %q, want JSON alone", got)
	}
}

func TestValidateContentType(t *testing.T) {
	for _, ok := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		if err := ValidateContentType(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := ValidateContentType("application/yaml"); err == nil {
		t.Error("application/yaml accepted, want an error")
	}
}
