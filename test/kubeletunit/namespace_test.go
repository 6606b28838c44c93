package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// execHelperEnv makes the test binary play the namespace helper: it
// executes the shell after execDyingWith from a thread other than its first.
const execHelperEnv = "KUBELETUNIT_TEST_EXEC_FROM_ANOTHER_THREAD"

// TestKubeletDiesWithTheUnitWhateverThreadExecutes: the helper's Go runtime
// may run its last step on any thread, and the program it executes must
// still die with the unit. The unit here is a thread of the test: the
// kernel sends the parent-death signal when the thread that forked exits,
// so ending that thread stands in for a killed unit (a stand-in: no real
// component kills the unit at the one moment this needs).
func TestKubeletDiesWithTheUnitWhateverThreadExecutes(t *testing.T) {
	if os.Getenv(execHelperEnv) != "" {
		execFromAnotherThread()
		return
	}
	var cmd *exec.Cmd
	var err error
	offTheFirstThread(func() {
		cmd = exec.Command(os.Args[0], "-test.run=^TestKubeletDiesWithTheUnitWhateverThreadExecutes$")
		cmd.Env = append(os.Environ(), execHelperEnv+"=1")
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		var stdout io.Reader
		if stdout, err = cmd.StdoutPipe(); err == nil {
			err = cmd.Start()
		}
		if err == nil {
			// The shell's line: the helper has executed it.
			var line string
			line, err = bufio.NewReader(stdout).ReadString('\n')
			if err == nil && line != "executed\n" {
				err = fmt.Errorf("the executed shell wrote %q", line)
			}
		}
	})
	if err != nil {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the executed program ended with %v, want SIGKILL", err)
		}
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("the executed program outlived its unit")
	}
}

// execFromAnotherThread runs execDyingWith on a thread that is not the
// process's first, as the Go runtime sometimes does in the real helper.
func execFromAnotherThread() {
	unit := os.Getppid()
	offTheFirstThread(func() {
		err := execDyingWith(unit, "/bin/sh", []string{"sh", "-c", "echo executed; exec sleep 600"})
		fmt.Fprintln(os.Stderr, "exec helper:", err)
		os.Exit(3)
	})
}

// offTheFirstThread calls f in a goroutine locked to a thread other than
// the process's first and returns when f does; that thread then ends with
// the goroutine (the runtime never ends the first thread).
func offTheFirstThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked on the thread that runs f: it ends with f.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Held here, the first thread is not the next goroutine's.
			offTheFirstThread(f)
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
	<-done
}
