package effective

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

// TestFlagTableIsCurrent fails when flags_generated.go differs from what
// flaggen writes for the k8s.io/kubernetes release pinned in hack/tools/kube,
// so a kubelet flag added or renamed upstream cannot land without the table.
// It compiles k8s.io/kubernetes packages, hence the -short escape.
func TestFlagTableIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the flag table generator (compiles k8s.io/kubernetes packages)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the generator: %v", err)
	}
	committed, err := os.ReadFile("flags_generated.go")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-10*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, goTool, "run", "./cmd/flaggen")
	cmd.Dir = filepath.Join("..", "..", "..", "hack", "tools", "kube")
	// The tools module stands alone; a go.work above it must not pull the
	// product module in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	generated, err := cmd.Output()
	if err != nil {
		t.Fatalf("running the generator in %s: %v\n%s", cmd.Dir, err, stderr.Bytes())
	}
	if !bytes.Equal(generated, committed) {
		t.Errorf("flags_generated.go is stale (%s); regenerate with: go generate ./pkg/kubeletconfig/effective", firstDifference(committed, generated))
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
