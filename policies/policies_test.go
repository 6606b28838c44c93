package policies_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/policy/policytest"
	"github.com/nodeguard/nodeguard/policies"
)

// TestRegoTests runs the *_test.rego files as `opa test` would.
func TestRegoTests(t *testing.T) {
	results, err := policytest.Run(context.Background(), os.DirFS("."), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 {
		t.Fatal("no Rego tests found")
	}
	for _, r := range results {
		if r.Pass() {
			continue
		}
		msg := r.String()
		if r.Error != nil {
			msg += ": " + r.Error.Error()
		}
		if r.FailedAt != nil {
			msg += "\n\tfailed at " + r.FailedAt.Location.String() + ": " + r.FailedAt.String()
		}
		if len(r.Output) > 0 {
			msg += "\n\toutput: " + string(r.Output)
		}
		t.Errorf("%s", msg)
	}
	t.Logf("%d Rego tests", len(results))
}

// TestEveryPolicyHasTests keeps a shipped policy from arriving untested.
func TestEveryPolicyHasTests(t *testing.T) {
	files, err := fs.Glob(policies.FS(), "*.rego")
	if err != nil {
		t.Fatal(err)
	}
	var served int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		served++
		testFile := strings.TrimSuffix(name, ".rego") + "_test.rego"
		if _, err := fs.Stat(policies.FS(), testFile); err != nil {
			t.Errorf("%s has no %s", name, testFile)
		}
	}
	if served == 0 {
		t.Fatal("no policies embedded")
	}
}

func TestPoliciesAreFormatted(t *testing.T) {
	unformatted, err := policytest.Unformatted(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range unformatted {
		t.Errorf("%s is not formatted as opa fmt formats it (run: go run github.com/open-policy-agent/opa@v1.22.3 fmt -w policies/)", name)
	}
}

// TestCapabilitiesFileIsCurrent keeps capabilities.json, which the stock OPA
// CLI reads, in step with what the engine compiles against.
func TestCapabilitiesFileIsCurrent(t *testing.T) {
	onDisk, err := os.ReadFile("capabilities.json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := policy.WriteCapabilities(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want.Bytes()) {
		t.Error("capabilities.json is stale: run go generate ./pkg/policy")
	}
}

// TestReadmeExamples keeps the worked examples in README.md loadable,
// formatted and passing their tests, next to the shipped policies.
func TestReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shipped, err := fs.Glob(os.DirFS("."), "*.rego")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range shipped {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	blocks := regexp.MustCompile("(?s)```rego\n(.*?)```").FindAllSubmatch(readme, -1)
	examples := 0
	for i, block := range blocks {
		src := block[1]
		// Fragments (no package) and configuration examples, which would
		// change what the shipped tests expect, are not checked here.
		if !bytes.HasPrefix(src, []byte("package ")) || bytes.HasPrefix(src, []byte("package nodeguard.config")) {
			continue
		}
		name := fmt.Sprintf("readme_example_%d.rego", i)
		if bytes.Contains(src[:bytes.IndexByte(src, '\n')], []byte("_test")) {
			name = fmt.Sprintf("readme_example_%d_test.rego", i)
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
		examples++
	}
	if examples < 3 {
		t.Fatalf("found %d examples in README.md, want at least 3", examples)
	}
	unformatted, err := policytest.Unformatted(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range unformatted {
		t.Errorf("README example %s is not formatted", name)
	}
	results, err := policytest.Run(context.Background(), os.DirFS(dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("%s", r)
		}
	}
	_, ctx := ktesting.NewTestContext(t)
	engine, err := policy.New(ctx, policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Ready(); err != nil {
		t.Errorf("README examples do not load into the engine: %v", err)
	}
}
