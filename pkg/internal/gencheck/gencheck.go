// Package gencheck checks, from a test, that a generated file is what its
// generator in hack/tools/kube writes for the k8s.io/kubernetes release
// pinned there, so that a bump of that release cannot land without the data.
package gencheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Current fails t when file differs from what `go run ./cmd/NAME` prints in
// the tools module at toolsDir (relative to the test's directory); regenerate
// is the command that fixes it. The generators compile k8s.io/kubernetes
// packages, so it is skipped with -short.
func Current(t *testing.T, file, toolsDir, name, regenerate string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("runs %s (compiles k8s.io/kubernetes packages)", name)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the generator: %v", err)
	}
	committed, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-10*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, goTool, "run", "./cmd/"+name)
	cmd.Dir = filepath.Clean(toolsDir)
	// The tools module stands alone; a go.work above it must not pull the
	// product module in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	generated, err := cmd.Output()
	if err != nil {
		t.Fatalf("running %s in %s: %v\n%s", name, cmd.Dir, err, stderr.Bytes())
	}
	if !bytes.Equal(generated, committed) {
		t.Errorf("%s is stale (%s); regenerate with: %s", file, firstDifference(committed, generated), regenerate)
	}
}

func firstDifference(committed, generated []byte) string {
	committedLines, generatedLines := bytes.Split(committed, []byte("\n")), bytes.Split(generated, []byte("\n"))
	for i := range min(len(committedLines), len(generatedLines)) {
		if !bytes.Equal(committedLines[i], generatedLines[i]) {
			return fmt.Sprintf("line %d: committed %q, generated %q", i+1, committedLines[i], generatedLines[i])
		}
	}
	return fmt.Sprintf("committed %d lines, generated %d", len(committedLines), len(generatedLines))
}
