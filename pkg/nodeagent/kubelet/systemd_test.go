package kubelet

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// TestSystemdRestarter drives the D-Bus restart path through go-systemd and
// godbus over a real dbus-daemon. The systemd on the other end is a stand-in
// (fakeSystemd) because no real systemd runs here: it owns
// org.freedesktop.systemd1 and exports the Manager's RestartUnit at
// /org/freedesktop/systemd1, and finishes each job with the JobRemoved
// signal go-systemd subscribes to. The bus, the wire protocol, the
// authentication and the signal matching are all real.
func TestSystemdRestarter(t *testing.T) {
	address := startBus(t)
	fake := exportFakeSystemd(t, address, map[string]string{
		"kubelet.service":  "done",
		"failing.service":  "failed",
		"slow.service":     "timeout",
		"replaced.service": "canceled",
	}, map[string]*dbus.Error{
		"denied.service": dbus.NewError("org.freedesktop.DBus.Error.AccessDenied", []any{"Interactive authentication required."}),
		"absent.service": dbus.NewError("org.freedesktop.systemd1.NoSuchUnit", []any{"Unit absent.service not found."}),
	})
	ctx := context.Background()

	t.Run("done is a restart", func(t *testing.T) {
		r := NewSystemdRestarter(address, "kubelet.service", 10*time.Second)
		// Twice: each restart has its own connection.
		for range 2 {
			if err := r.Restart(ctx); err != nil {
				t.Fatalf("Restart = %v", err)
			}
		}
		calls := fake.callsSoFar()
		want := restartCall{unit: "kubelet.service", mode: "replace"}
		if len(calls) != 2 || calls[0] != want || calls[1] != want {
			t.Fatalf("systemd was asked %+v, want RestartUnit(%q, %q) twice", calls, want.unit, want.mode)
		}
	})

	for unit, result := range map[string]string{"failing.service": "failed", "slow.service": "timeout", "replaced.service": "canceled"} {
		t.Run(result+" is a failed restart", func(t *testing.T) {
			err := NewSystemdRestarter(address, unit, 10*time.Second).Restart(ctx)
			t.Log(err)
			var failed *JobFailedError
			if !errors.As(err, &failed) || failed.Unit != unit || failed.Result != result {
				t.Fatalf("Restart = %v, want a JobFailedError for %s with result %q", err, unit, result)
			}
			if msg := err.Error(); !strings.Contains(msg, unit) || !strings.Contains(msg, `"`+result+`"`) {
				t.Errorf("the error does not name the unit and the result: %s", msg)
			}
		})
	}

	t.Run("no JobRemoved is a timeout", func(t *testing.T) {
		start := time.Now()
		err := NewSystemdRestarter(address, "hung.service", 300*time.Millisecond).Restart(ctx)
		t.Log(err)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "hung.service") {
			t.Fatalf("Restart = %v, want a deadline error naming hung.service", err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("the timeout took %v to be noticed", elapsed)
		}
		if calls := fake.callsSoFar(); !slices.Contains(calls, restartCall{unit: "hung.service", mode: "replace"}) {
			t.Errorf("systemd was never asked to restart hung.service: %+v", calls)
		}
	})

	t.Run("systemd's refusal is an error", func(t *testing.T) {
		err := NewSystemdRestarter(address, "denied.service", 10*time.Second).Restart(ctx)
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "denied.service") || !strings.Contains(err.Error(), "polkit") {
			t.Fatalf("Restart = %v, want an error naming the unit and the permission needed", err)
		}
		err = NewSystemdRestarter(address, "absent.service", 10*time.Second).Restart(ctx)
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "NoSuchUnit") || strings.Contains(err.Error(), "polkit") {
			t.Fatalf("Restart = %v, want systemd's NoSuchUnit", err)
		}
	})
}

// TestSystemdRestarterWithoutSystemd: a real bus on which nobody owns
// org.freedesktop.systemd1, as on a host whose systemd is not on that bus.
func TestSystemdRestarterWithoutSystemd(t *testing.T) {
	address := startBus(t)
	err := NewSystemdRestarter(address, "kubelet.service", 10*time.Second).Restart(context.Background())
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "kubelet.service") || !strings.Contains(err.Error(), "ServiceUnknown") {
		t.Fatalf("Restart = %v, want the bus's ServiceUnknown for the unit", err)
	}
}

// TestSystemdRestarterUnreachableBus: no bus at all, and a socket that
// accepts but never speaks D-Bus, which must time out rather than hang.
func TestSystemdRestarterUnreachableBus(t *testing.T) {
	dir := t.TempDir()
	missing := "unix:path=" + filepath.Join(dir, "no-bus")
	err := NewSystemdRestarter(missing, "kubelet.service", 10*time.Second).Restart(context.Background())
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "connecting to the system bus at "+missing) {
		t.Fatalf("Restart = %v, want a connection error naming the address", err)
	}

	silentPath := filepath.Join(dir, "silent")
	listener, err := net.Listen("unix", silentPath)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	start := time.Now()
	err = NewSystemdRestarter("unix:path="+silentPath, "kubelet.service", 300*time.Millisecond).Restart(context.Background())
	t.Log(err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Restart = %v, want a deadline error", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("a silent bus held the restart for %v", elapsed)
	}

	if err := NewSystemdRestarter("not an address", "kubelet.service", time.Second).Restart(context.Background()); err == nil {
		t.Fatal("a malformed address connected")
	}
}

func TestCheckUnitNameAndBusAddress(t *testing.T) {
	for _, good := range []string{"kubelet.service", "kubelet@blue.service", "snap.k8s.kubelet.service", `kube\x2dlet.service`} {
		if err := CheckUnitName(good); err != nil {
			t.Errorf("CheckUnitName(%q) = %v", good, err)
		}
	}
	for _, bad := range []string{"", "kubelet", ".service", "kube let.service", "kubelet.service;reboot", strings.Repeat("k", 250) + ".service"} {
		if err := CheckUnitName(bad); err == nil {
			t.Errorf("CheckUnitName(%q) accepted", bad)
		}
	}
	for _, good := range []string{DefaultSystemBusAddress, "unix:abstract=/x,guid=1", "tcp:host=127.0.0.1,port=1;unix:path=/x"} {
		if err := CheckBusAddress(good); err != nil {
			t.Errorf("CheckBusAddress(%q) = %v", good, err)
		}
	}
	for _, bad := range []string{"", "/run/dbus/system_bus_socket", "unix:path", ":path=/x", "unix:path=/x;"} {
		if err := CheckBusAddress(bad); err == nil {
			t.Errorf("CheckBusAddress(%q) accepted", bad)
		}
	}
}
