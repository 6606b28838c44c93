package policy

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/graph"
)

// fakeGraph is a GraphReader with fixed answers.
type fakeGraph struct {
	mu    sync.Mutex
	nodes map[string]*graph.NodeInfo
	// reach holds "node/namespace/name" for every readable ConfigMap.
	reach map[string]bool
	// panics makes every call panic, as a buggy reader might.
	panics bool
	calls  int
}

func (f *fakeGraph) CanReadConfigMap(node, namespace, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.panics {
		panic("fake graph exploded")
	}
	return f.reach[node+"/"+namespace+"/"+name]
}

func (f *fakeGraph) Node(name string) (*graph.NodeInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.panics {
		panic("fake graph exploded")
	}
	info, ok := f.nodes[name]
	return info, ok
}

func (f *fakeGraph) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func nodeInfo(name string, labels map[string]string, assignment string) *graph.NodeInfo {
	info := &graph.NodeInfo{Name: name, Labels: labels, KubeletVersion: "v1.37.2"}
	if assignment != "" {
		ref, ok, err := contract.ParseConfigSource(assignment)
		if err != nil || !ok {
			panic("bad assignment in test: " + assignment)
		}
		info.Assignment = &contract.Assignment{ConfigMap: ref, Key: contract.ConfigMapKey}
	}
	return info
}

// writeFiles writes name -> content under dir, creating directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newEngine builds an engine over a fresh directory holding files.
func newEngine(t testing.TB, files map[string]string, opts Options) (*Engine, string) {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	opts.Dir = dir
	e, err := New(testContext(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return e, dir
}

// testContext routes the engine's logs to the test's log.
func testContext(t testing.TB) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func configMapRequest(op admissionv1.Operation, namespace, name string, object string) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Name:      name,
		Namespace: namespace,
		Operation: op,
		Object:    runtime.RawExtension{Raw: []byte(object)},
	}
}

func configMapRead(user string, groups []string, namespace, name string) *authorizationv1.SubjectAccessReviewSpec {
	return &authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "get", Version: "v1", Resource: "configmaps", Name: name,
		},
	}
}
