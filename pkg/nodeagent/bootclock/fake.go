package bootclock

import (
	"sync"
	"time"
)

// Fake is a Clock for tests: it moves only when told to.
type Fake struct {
	mu     sync.Mutex
	bootID string
	since  time.Duration
}

// NewFake starts a fake clock on bootID at since.
func NewFake(bootID string, since time.Duration) *Fake {
	return &Fake{bootID: bootID, since: since}
}

// BootID implements Clock.
func (f *Fake) BootID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bootID
}

// SinceBoot implements Clock.
func (f *Fake) SinceBoot() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.since
}

// Step moves the clock forward.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since += d
}

// Reboot starts a new boot with a fresh elapsed time.
func (f *Fake) Reboot(bootID string, since time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bootID, f.since = bootID, since
}
