package statelock

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

const retry = 10 * time.Millisecond

func acquireWithin(t *testing.T, dir string, d time.Duration) (*Lock, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return Acquire(ctx, dir, retry)
}

func TestOneHolderAtATime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := acquireWithin(t, dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquireWithin(t, dir, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Acquire while the lock is held: %v, want it to wait until its context ends", err)
	}

	// A waiting agent takes the lock as soon as the holder lets go.
	got := make(chan error, 1)
	go func() {
		second, err := acquireWithin(t, dir, 10*time.Second)
		if err == nil {
			err = second.Release()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiting Acquire: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatalf("the lock file should stay after Release: %v", err)
	}
}

func TestUnusableDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireWithin(t, filepath.Join(file, "state"), time.Second); err == nil {
		t.Fatal("Acquire under a regular file succeeded")
	}
}

// holderEnv makes TestHolderProcess hold the lock of the directory it names.
const holderEnv = "NODEGUARD_STATELOCK_HOLDER"

// TestHolderProcess is TestKilledHolderLeavesNoLock's other agent: it takes
// the lock, says so, and waits to be killed. Skipped in any other run.
func TestHolderProcess(t *testing.T) {
	dir := os.Getenv(holderEnv)
	if dir == "" {
		t.Skip("runs only as TestKilledHolderLeavesNoLock's helper process")
	}
	if _, err := acquireWithin(t, dir, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
}

// TestKilledHolderLeavesNoLock: an agent killed with SIGKILL never releases
// anything, and the next one must still get the lock.
func TestKilledHolderLeavesNoLock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the agent runs on Linux")
	}
	dir := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderProcess$", "-test.v")
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "locked" {
	}
	if _, err := acquireWithin(t, dir, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while another process holds the lock: %v, want it to wait", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	lock, err := acquireWithin(t, dir, 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
}
