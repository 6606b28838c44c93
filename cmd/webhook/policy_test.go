package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/policy"
)

func TestPolicyLoadStatus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "p.rego")
	write := func(content string) {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("package nodeguard.authz\n\ndeny contains \"x\" if {\n") // does not parse
	engine, err := policy.New(ctx, policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	status := policyLoadStatus{engine}
	if engine.Ready() == nil || !strings.Contains(status.Degraded(), "no policy set has loaded yet") || !strings.Contains(status.Degraded(), "p.rego") {
		t.Fatalf("before any good set: ready=%v degraded=%q", engine.Ready(), status.Degraded())
	}

	write("package nodeguard.authz\n\ndeny contains \"x\" if input.spec.user == \"x\"\n")
	if err := engine.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if engine.Ready() != nil || status.Degraded() != "" {
		t.Fatalf("after a good set: ready=%v degraded=%q", engine.Ready(), status.Degraded())
	}

	write("package nodeguard.authz\n\ndeny contains x if {\n")
	if err := engine.Reload(ctx); err == nil {
		t.Fatal("a broken set loaded")
	}
	if engine.Ready() != nil || !strings.Contains(status.Degraded(), "the last good policy set ("+engine.Hash()+") keeps serving") || !strings.Contains(status.Degraded(), "p.rego:") {
		t.Fatalf("after a broken set: ready=%v degraded=%q", engine.Ready(), status.Degraded())
	}
}
