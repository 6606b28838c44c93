package bootclock

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Clock tells the current boot and the time elapsed since it.
type Clock interface {
	// BootID identifies the current boot.
	BootID() string
	// SinceBoot is the time elapsed since boot, suspend included.
	SinceBoot() time.Duration
}

// DefaultBootIDPath is where Linux publishes the boot ID.
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// System is the machine's clock. The boot ID is read once: it cannot change
// without the process dying.
type System struct {
	bootID string
}

// NewSystem reads the boot ID from bootIDPath (DefaultBootIDPath when empty)
// and checks that CLOCK_BOOTTIME is readable.
func NewSystem(bootIDPath string) (*System, error) {
	if bootIDPath == "" {
		bootIDPath = DefaultBootIDPath
	}
	data, err := os.ReadFile(bootIDPath)
	if err != nil {
		return nil, fmt.Errorf("reading the boot ID: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return nil, fmt.Errorf("reading the boot ID: %s is empty", bootIDPath)
	}
	if _, err := sinceBoot(); err != nil {
		return nil, err
	}
	return &System{bootID: id}, nil
}

// BootID implements Clock.
func (s *System) BootID() string { return s.bootID }

// SinceBoot implements Clock. CLOCK_BOOTTIME cannot fail once it has been
// read successfully, so the error is checked in NewSystem only.
func (s *System) SinceBoot() time.Duration {
	d, _ := sinceBoot()
	return d
}

func sinceBoot() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, fmt.Errorf("reading CLOCK_BOOTTIME: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}
