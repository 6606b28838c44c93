package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	systemd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"k8s.io/klog/v2"
)

const (
	// DefaultSystemBusAddress is where the system bus listens on a
	// systemd host; a pod reaches it through a hostPath mount of /run/dbus.
	DefaultSystemBusAddress = "unix:path=/run/dbus/system_bus_socket"
	// DefaultKubeletUnit is the unit kubeadm and most distributions install.
	DefaultKubeletUnit = "kubelet.service"
)

// unitSuffixes are the unit types systemd knows; the D-Bus API, unlike
// systemctl, does not add ".service" to a bare name.
var unitSuffixes = []string{".service", ".socket", ".target", ".device", ".mount", ".automount",
	".swap", ".timer", ".path", ".slice", ".scope"}

// CheckUnitName refuses what systemd would refuse as a unit name, so that a
// typo is reported at start-up rather than at the first restart.
func CheckUnitName(name string) error {
	if name == "" {
		return errors.New("the unit name is empty")
	}
	if len(name) > 255 {
		return fmt.Errorf("unit %q: longer than 255 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(":-_.\\@", c)) {
			return fmt.Errorf("unit %q: %q is not allowed in a unit name", name, c)
		}
	}
	for _, suffix := range unitSuffixes {
		if base, ok := strings.CutSuffix(name, suffix); ok && base != "" {
			return nil
		}
	}
	return fmt.Errorf("unit %q: want the full name with its type, e.g. kubelet.service", name)
}

// CheckBusAddress checks that address has the shape of a D-Bus server
// address ("transport:key=value,..." entries separated by ";"). Whether
// anything listens there is only known when the agent dials it.
func CheckBusAddress(address string) error {
	if address == "" {
		return errors.New("the bus address is empty")
	}
	for entry := range strings.SplitSeq(address, ";") {
		transport, params, ok := strings.Cut(entry, ":")
		if !ok || transport == "" {
			return fmt.Errorf("bus address %q: want transport:key=value, e.g. %s", address, DefaultSystemBusAddress)
		}
		for param := range strings.SplitSeq(params, ",") {
			if key, _, ok := strings.Cut(param, "="); !ok || key == "" {
				return fmt.Errorf("bus address %q: %q is not key=value", address, param)
			}
		}
	}
	return nil
}

// SystemdRestarter restarts the kubelet's unit through systemd's D-Bus API
// on the system bus, and waits for systemd's verdict on the restart job.
type SystemdRestarter struct {
	BusAddress string
	Unit       string
	// Timeout bounds connecting, queueing the job and waiting for its
	// result, together; none when 0.
	Timeout time.Duration
}

// NewSystemdRestarter restarts unit through the bus at busAddress.
func NewSystemdRestarter(busAddress, unit string, timeout time.Duration) *SystemdRestarter {
	return &SystemdRestarter{BusAddress: busAddress, Unit: unit, Timeout: timeout}
}

// JobFailedError is a job (restart, stop, start) that systemd finished with
// a result other than "done".
type JobFailedError struct {
	Unit   string
	Result string
	// Job is "restart", "stop" or "start"; empty reads as "restart".
	Job string
}

func (e *JobFailedError) Error() string {
	job := e.Job
	if job == "" {
		job = "restart"
	}
	msg := fmt.Sprintf("systemd finished the %s of %s with result %q, not \"done\"", job, e.Unit, e.Result)
	if why := jobResultMeaning[e.Result]; why != "" {
		msg += ": " + why
	}
	if e.Result == "failed" {
		msg += " (journalctl -u " + e.Unit + " says why)"
	}
	return msg
}

// jobResultMeaning says what each of systemd's job results means for a
// restart, so that the status on the Node tells an operator where to look.
var jobResultMeaning = map[string]string{
	"failed":     "the unit failed to start",
	"timeout":    "the unit did not finish starting within its own start timeout",
	"canceled":   "the job was canceled or replaced by another job before it finished",
	"dependency": "a unit the kubelet requires failed",
	"skipped":    "the job did not apply to the unit's state",
}

// unitJob is one of go-systemd's *UnitContext calls.
type unitJob func(conn *systemd.Conn, ctx context.Context, name, mode string, ch chan<- string) (int, error)

// Restart queues a restart of the unit in mode "replace" (a pending stop or
// start of the kubelet is superseded rather than making the restart fail)
// and waits for the job's result.
func (r *SystemdRestarter) Restart(ctx context.Context) error {
	return r.runJob(ctx, "restart", (*systemd.Conn).RestartUnitContext)
}

// Stop stops the unit and waits for it to be stopped, for a restart that
// must change the kubelet's state files while it is down.
func (r *SystemdRestarter) Stop(ctx context.Context) error {
	return r.runJob(ctx, "stop", (*systemd.Conn).StopUnitContext)
}

// Start starts the unit and waits for systemd's verdict.
func (r *SystemdRestarter) Start(ctx context.Context) error {
	return r.runJob(ctx, "start", (*systemd.Conn).StartUnitContext)
}

func (r *SystemdRestarter) runJob(ctx context.Context, verb string, call unitJob) error {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	// A connection per job: jobs are rare, and a bus daemon restarted in
	// between must not leave the agent holding a dead one.
	conn, err := systemd.NewConnection(func() (*dbus.Conn, error) { return r.dial(ctx) })
	if err != nil {
		return fmt.Errorf("%s of %s: connecting to the system bus at %s: %w", verb, r.Unit, r.BusAddress, withCause(ctx, err))
	}
	defer conn.Close()

	// Buffered: go-systemd delivers the result while holding its lock, and
	// a result arriving after a timeout must not block anything.
	results := make(chan string, 1)
	jobID, err := call(conn, ctx, r.Unit, "replace", results)
	if err != nil {
		err = withCause(ctx, err)
		name := dbusErrorName(err)
		switch {
		case needsPrivilege(name):
			return fmt.Errorf("%s of %s over D-Bus: %s: %w (managing a unit over the system bus needs root or a polkit rule allowing it)", verb, r.Unit, name, err)
		case name != "":
			return fmt.Errorf("%s of %s over D-Bus: %s: %w", verb, r.Unit, name, err)
		}
		return fmt.Errorf("%s of %s over D-Bus: %w", verb, r.Unit, err)
	}
	klog.FromContext(ctx).V(2).Info("Queued a job for the kubelet's unit", "unit", r.Unit, "job", verb, "jobID", jobID)
	select {
	case result := <-results:
		if result != "done" {
			return &JobFailedError{Unit: r.Unit, Result: result, Job: verb}
		}
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s of %s: systemd reported no result for job %d in time: %w", verb, r.Unit, jobID, ctx.Err())
		}
		return fmt.Errorf("%s of %s: stopped waiting for job %d: %w", verb, r.Unit, jobID, ctx.Err())
	}
}

// dial connects and authenticates to the bus. The connection lives no
// longer than ctx: godbus closes it when ctx is done, which also ends an
// authentication or Hello that a stuck peer never answers.
func (r *SystemdRestarter) dial(ctx context.Context) (*dbus.Conn, error) {
	conn, err := dbus.Dial(r.BusAddress, dbus.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	// EXTERNAL by numeric uid only: the system bus accepts nothing else,
	// and a name lookup would need the host's user database.
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticating: %w", err)
	}
	if err := conn.Hello(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("registering on the bus: %w", err)
	}
	return conn, nil
}

// withCause adds ctx's error to err when ctx ended: godbus reports a
// connection closed by the context without saying that it timed out.
func withCause(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return err
}

// dbusErrorName is the D-Bus error name in err, if any: godbus's message
// carries only the error's text, and the name is what tells an operator
// who refused (e.g. org.freedesktop.systemd1.NoSuchUnit).
func dbusErrorName(err error) string {
	var value dbus.Error
	var pointer *dbus.Error
	switch {
	case errors.As(err, &value):
		return value.Name
	case errors.As(err, &pointer) && pointer != nil:
		return pointer.Name
	}
	return ""
}

// needsPrivilege reports the errors that systemd (through polkit) and the
// bus return to a caller not allowed to manage units.
func needsPrivilege(name string) bool {
	return name == "org.freedesktop.DBus.Error.AccessDenied" || name == "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"
}
