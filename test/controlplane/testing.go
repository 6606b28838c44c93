package controlplane

import "testing"

// StartForTest starts a control plane for the duration of t. It fails t if the control plane
// does not start, stops it when t ends, and prints the tail of its logs if t failed. An empty
// opts.WorkDir becomes a t.TempDir().
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	cp, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	// Registered after t.TempDir, so it runs first: the logs still exist.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.LogTail(logTailLines))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return cp
}
