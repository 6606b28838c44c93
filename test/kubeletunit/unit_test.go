package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRestartDelay(t *testing.T) {
	fixed := unitOptions{restartSec: time.Second}
	stepped := unitOptions{restartSec: 100 * time.Millisecond, restartSteps: 2, restartMaxDelay: 400 * time.Millisecond}
	for _, tc := range []struct {
		opts unitOptions
		n    int
		want time.Duration
	}{
		{fixed, 0, time.Second},
		{fixed, 5, time.Second},
		{stepped, 0, 100 * time.Millisecond},
		{stepped, 1, 200 * time.Millisecond},
		{stepped, 2, 400 * time.Millisecond},
		{stepped, 9, 400 * time.Millisecond},
	} {
		if got := restartDelay(tc.opts, tc.n); got.Round(time.Millisecond) != tc.want {
			t.Errorf("restartDelay(%+v, %d) = %v, want %v", tc.opts, tc.n, got, tc.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := unitOptions{control: "c", journal: "j", argv: []string{"kubelet"}, restartSec: time.Second, stopTimeout: time.Second, sysctls: sysctlFlag{}}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	bad := unitOptions{restartSec: time.Second, restartSteps: 2, sysctls: sysctlFlag{"vm/x": "1"}, overlays: overlayFlag{"/etc": "/tmp/n/etc"}}
	err := bad.validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--control", "--journal", "after --", "--stop-timeout", "--restart-max-delay", "--sysctl needs --private-mounts", "--overlay needs --private-mounts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not in %v", want, err)
		}
	}
	var s sysctlFlag = sysctlFlag{}
	for _, v := range []string{"noequals", "/abs=1", "../up=1", "=1"} {
		if s.Set(v) == nil {
			t.Errorf("--sysctl %q accepted", v)
		}
	}
	o := overlayFlag{}
	for _, v := range []string{"/etc", "etc=/tmp/n/etc", "/=/tmp/n/root", "/etc="} {
		if o.Set(v) == nil {
			t.Errorf("--overlay %q accepted", v)
		}
	}
	if err := o.Set("/etc/=/tmp/n/etc"); err != nil || o["/etc"] != "/tmp/n/etc" {
		t.Errorf("--overlay /etc/=/tmp/n/etc: %v, %v", err, o)
	}
}

// TestPrepareOverlays: each overlay gets its upper directory and a work
// directory beside it, and the helper's flags come in a fixed order.
func TestPrepareOverlays(t *testing.T) {
	dir := t.TempDir()
	overlays, err := prepareOverlays(map[string]string{"/run": dir + "/run", "/etc": dir + "/etc"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--overlay", "/etc=" + dir + "/etc", "--overlay", "/run=" + dir + "/run"}; !slices.Equal(helperArgs(nil, overlays), want) {
		t.Errorf("flags %q, want %q", helperArgs(nil, overlays), want)
	}
	for _, d := range []string{"etc", "etc.work", "run", "run.work"} {
		if fi, err := os.Stat(dir + "/" + d); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// readJournal returns the journal's entries.
func readJournal(t *testing.T, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []Entry
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var e Entry
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	return entries
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnit runs a stand-in "kubelet" (a shell that exits when its file says
// so) under the unit: Restart=always after an exit, restart and stop
// commands, and a journal that tells them apart.
func TestUnit(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("run"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := unitOptions{
		control: filepath.Join(dir, "unit.sock"), journal: filepath.Join(dir, "journal"),
		restartSec: 50 * time.Millisecond, stopTimeout: 5 * time.Second, configFile: config, sysctls: sysctlFlag{},
		// Exits 3 at once when the file says "crash", else runs.
		argv: []string{"/bin/sh", "-c", `if grep -q crash "$0"; then exit 3; fi; exec sleep 600`, config},
	}
	u, err := newUnit(opts)
	if err != nil {
		t.Fatal(err)
	}
	signals := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- u.run(signals) }()
	defer func() {
		signals <- syscall.SIGTERM
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	status := func() string {
		answer, err := ask(opts.control, "status", 5*time.Second)
		if err != nil {
			return err.Error()
		}
		return answer
	}
	waitFor(t, "the unit to be active", func() bool { return strings.HasPrefix(status(), "active ") })

	// A crashing configuration: restarted by the unit, again and again.
	if err := os.WriteFile(config, []byte("crash"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(opts.control, "restart", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two automatic restarts", func() bool {
		n := 0
		for _, e := range readJournal(t, opts.journal) {
			if e.Cause == "auto-restart" {
				n++
			}
		}
		return n >= 2
	})
	// Fixed: a restart command brings it up for good.
	if err := os.WriteFile(config, []byte("run"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(opts.control, "restart", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := ask(opts.control, "stop", 5*time.Second); err != nil || got != "inactive" {
		t.Fatalf("stop: %q %v", got, err)
	}
	if got := status(); got != "inactive" {
		t.Fatalf("status after stop: %q", got)
	}

	entries := readJournal(t, opts.journal)
	first, last := entries[0], entries[len(entries)-1]
	if first.Event != "start" || first.Cause != "start" {
		t.Errorf("first entry %+v", first)
	}
	if last.Event != "exit" || !last.Requested {
		t.Errorf("last entry %+v, want the requested exit of the stop", last)
	}
	var crashes int
	for _, e := range entries {
		if e.Event == "exit" && !e.Requested {
			crashes++
			if e.ExitCode == nil || *e.ExitCode != 3 {
				t.Errorf("a crash with exit code %v, want 3", e.ExitCode)
			}
		}
		if e.Event == "start" && e.ConfigSHA256 == "" {
			t.Errorf("a start without the config's hash: %+v", e)
		}
	}
	if crashes < 2 {
		t.Errorf("%d crashes in the journal, want at least 2", crashes)
	}
}

func TestControlWithoutUnit(t *testing.T) {
	_, err := ask(filepath.Join(t.TempDir(), "none.sock"), "restart", time.Second)
	if err == nil || !strings.Contains(err.Error(), "no kubelet unit answers") {
		t.Fatalf("restart without a unit: %v", err)
	}
}
