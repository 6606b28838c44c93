package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
)

// TestRepeatedKeysAreRefused sends both endpoints a review the apiserver
// could have sent, and then that review with one key repeated, for every
// object in it at every depth (the embedded Node included): each variant
// is answered, over HTTP 200, with a refusal.
func TestRepeatedKeysAreRefused(t *testing.T) {
	g := graph.New(nil)
	g.MarkSynced()
	configMaps := corelisters.NewConfigMapLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	s := settings.Default()
	admitter := admission.New(func() *settings.Settings { return s }, configMaps, g)
	validate := server.Validate(admitter, nil, 1<<20)
	authorize := server.Authorize(authz.New(g, nil), nil, 1<<20)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
		Status: corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	nodeJSON := mustJSON(t, node)
	review := mustJSON(t, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         "uid-1",
			Kind:        metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			SubResource: "status", Name: "n1", Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}},
			Object:    runtime.RawExtension{Raw: nodeJSON},
			OldObject: runtime.RawExtension{Raw: nodeJSON},
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	})
	sar := mustJSON(t, &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"},
			Extra: map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"X509SHA256=abc"}},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "watch", Version: "v1", Resource: "configmaps", Namespace: "kube-system", Name: "kubelet-gpu",
				FieldSelector: &authorizationv1.FieldSelectorAttributes{
					RawSelector:  "metadata.name=kubelet-gpu",
					Requirements: []metav1.FieldSelectorRequirement{{Key: "metadata.name", Operator: metav1.FieldSelectorOpIn, Values: []string{"kubelet-gpu"}}},
				},
			},
		},
	})

	for _, endpoint := range []struct {
		name    string
		handler http.Handler
		body    []byte
		refused func(t *testing.T, answer []byte) bool
	}{
		{"/validate", validate, review, func(t *testing.T, answer []byte) bool {
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(answer, &got); err != nil || got.Response == nil || got.Response.UID != "uid-1" {
				t.Fatalf("answer %s is not an AdmissionReview for the request: %v", answer, err)
			}
			return !got.Response.Allowed && strings.Contains(got.Response.Result.Message, "repeats a key")
		}},
		{"/authorize", authorize, sar, func(t *testing.T, answer []byte) bool {
			var got authorizationv1.SubjectAccessReview
			if err := json.Unmarshal(answer, &got); err != nil {
				t.Fatalf("answer %s is not a SubjectAccessReview: %v", answer, err)
			}
			return !got.Status.Allowed && got.Status.Denied && got.Status.Reason == server.ReasonMalformedSubjectAccessReview
		}},
	} {
		t.Run(endpoint.name, func(t *testing.T) {
			if answer := post(t, endpoint.handler, endpoint.name, endpoint.body); endpoint.refused(t, answer) {
				t.Fatalf("the review as the apiserver sends it was refused: %s", answer)
			}
			variants := withRepeatedKeys(t, endpoint.body)
			if len(variants) < 5 {
				t.Fatalf("only %d variants: the fixture is not deep enough", len(variants))
			}
			for path, body := range variants {
				if answer := post(t, endpoint.handler, endpoint.name, body); !endpoint.refused(t, answer) {
					t.Errorf("a review repeating a key of %s was not refused: %s", path, answer)
				}
			}
		})
	}
}

func post(t *testing.T, h http.Handler, path string, body []byte) []byte {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path+"?timeout=10s", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", path, w.Code, w.Body)
	}
	return w.Body.Bytes()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withRepeatedKeys returns, for every object in the JSON document body, by
// its path, the document with that object's first key written twice.
func withRepeatedKeys(t *testing.T, body []byte) map[string][]byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	collectObjects(doc, "$", &paths)
	variants := make(map[string][]byte, len(paths))
	for _, path := range paths {
		var b bytes.Buffer
		writeRepeating(t, &b, doc, "$", path)
		variants[path] = b.Bytes()
	}
	return variants
}

func collectObjects(v any, path string, paths *[]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			*paths = append(*paths, path)
		}
		for k, child := range x {
			collectObjects(child, path+"."+k, paths)
		}
	case []any:
		for i, child := range x {
			collectObjects(child, fmt.Sprintf("%s[%d]", path, i), paths)
		}
	}
}

// writeRepeating encodes v, repeating the first key of the object at
// target.
func writeRepeating(t *testing.T, w io.Writer, v any, path, target string) {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		})
		if path == target {
			keys = append([]string{keys[0]}, keys...)
		}
		fmt.Fprint(w, "{")
		for i, k := range keys {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			_, _ = w.Write(mustJSON(t, k))
			fmt.Fprint(w, ":")
			writeRepeating(t, w, x[k], path+"."+k, target)
		}
		fmt.Fprint(w, "}")
	case []any:
		fmt.Fprint(w, "[")
		for i, child := range x {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			writeRepeating(t, w, child, fmt.Sprintf("%s[%d]", path, i), target)
		}
		fmt.Fprint(w, "]")
	default:
		_, _ = w.Write(mustJSON(t, x))
	}
}
