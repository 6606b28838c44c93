package bootclock

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSystem(t *testing.T) {
	c, err := NewSystem("")
	if err != nil {
		t.Skipf("no boot ID on this system: %v", err)
	}
	if c.BootID() == "" {
		t.Fatal("empty boot ID")
	}
	first := c.SinceBoot()
	if first <= 0 {
		t.Fatalf("SinceBoot = %v, want a positive duration", first)
	}
	if second := c.SinceBoot(); second < first {
		t.Fatalf("CLOCK_BOOTTIME went back: %v then %v", first, second)
	}
}

func TestSystemBootIDErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := NewSystem(path); err == nil {
			t.Errorf("NewSystem(%s) succeeded", path)
		}
	}
}
