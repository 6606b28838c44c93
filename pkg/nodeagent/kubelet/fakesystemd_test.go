package kubelet

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// busConfig makes dbus-daemon a private bus on one socket that lets the
// test own any name and call anyone, as the session bus's policy does.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// startBus runs a real dbus-daemon for the test and returns its address.
func startBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("dbus-daemon is not installed; the D-Bus restart path needs a real bus to be tested")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(config, fmt.Appendf(nil, busConfig, filepath.Join(dir, "bus")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+config, "--nofork", "--nopidfile", "--print-address")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// dbus-daemon complains about limits it may not raise in a sandbox;
	// its words matter only when the test fails.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if out, _ := os.ReadFile(stderr.Name()); len(out) > 0 {
				t.Logf("dbus-daemon's stderr:\n%s", out)
			}
		}
	})
	addresses := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addresses <- strings.TrimSpace(line)
	}()
	select {
	case address := <-addresses:
		if address == "" {
			t.Fatal("dbus-daemon printed no address")
		}
		return address
	case <-time.After(10 * time.Second):
		t.Fatal("dbus-daemon did not print its address")
		return ""
	}
}

// restartCall is one RestartUnit call the stand-in received.
type restartCall struct{ unit, mode string }

// fakeSystemd stands in for systemd's manager object: it answers RestartUnit
// with a job path and then, as systemd does when the job finishes, emits the
// Manager's JobRemoved signal (id, job, unit, result). What it answers is
// chosen by unit name through results; a unit missing from it gets no
// JobRemoved at all, like a job that never finishes.
type fakeSystemd struct {
	conn    *dbus.Conn
	results map[string]string
	errors  map[string]*dbus.Error

	mu    sync.Mutex
	calls []restartCall
	next  uint32
}

const (
	managerPath  = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIface = "org.freedesktop.systemd1.Manager"
)

// exportFakeSystemd connects to the bus at address, takes systemd's name
// and exports the stand-in manager.
func exportFakeSystemd(t *testing.T, address string, results map[string]string, errs map[string]*dbus.Error) *fakeSystemd {
	t.Helper()
	conn, err := dbus.Connect(address)
	if err != nil {
		t.Fatalf("connecting the stand-in systemd to the bus: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	f := &fakeSystemd{conn: conn, results: results, errors: errs, next: 100}
	if err := conn.Export(f, managerPath, managerIface); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName("org.freedesktop.systemd1", dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("taking the name org.freedesktop.systemd1: %v, %v", reply, err)
	}
	return f
}

// RestartUnit is the Manager's method of that name.
func (f *fakeSystemd) RestartUnit(unit, mode string) (dbus.ObjectPath, *dbus.Error) {
	f.mu.Lock()
	f.calls = append(f.calls, restartCall{unit: unit, mode: mode})
	f.next++
	id := f.next
	f.mu.Unlock()
	if err := f.errors[unit]; err != nil {
		return "", err
	}
	job := dbus.ObjectPath(fmt.Sprintf("/org/freedesktop/systemd1/job/%d", id))
	result, finishes := f.results[unit]
	if finishes {
		// After the reply, as systemd finishes a job after queueing it.
		// Another job finishing first must not be taken for this one.
		go func() {
			other := dbus.ObjectPath(fmt.Sprintf("/org/freedesktop/systemd1/job/%d", id+10000))
			_ = f.conn.Emit(managerPath, managerIface+".JobRemoved", id+10000, other, "other.service", "failed")
			_ = f.conn.Emit(managerPath, managerIface+".JobRemoved", id, job, unit, result)
		}()
	}
	return job, nil
}

// callsSoFar returns the RestartUnit calls received.
func (f *fakeSystemd) callsSoFar() []restartCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]restartCall(nil), f.calls...)
}
