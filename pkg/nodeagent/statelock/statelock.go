package statelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"
)

// FileName is the lock file in the state directory.
const FileName = "agent.lock"

// waitLogEvery is how often a waiting agent says it is still waiting.
const waitLogEvery = time.Minute

// errHeld is tryLock's answer when another open file holds the lock.
var errHeld = errors.New("held by another agent")

// Lock is a held lock; Release gives it up.
type Lock struct {
	file *os.File
}

// Acquire takes the lock of state directory dir (created if missing),
// waiting while another agent holds it and trying again every retry, until
// ctx ends, when it returns ctx's error.
func Acquire(ctx context.Context, dir string, retry time.Duration) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the state directory's lock %s: %w", path, err)
	}
	logger := klog.FromContext(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var waitingSince, lastLog time.Time
	for {
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-timer.C:
		}
		err := tryLock(f)
		if err == nil {
			if !waitingSince.IsZero() {
				logger.Info("Took the state directory's lock", "path", path, "waited", time.Since(waitingSince).Round(time.Millisecond))
			}
			return &Lock{file: f}, nil
		}
		if !errors.Is(err, errHeld) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		now := time.Now()
		if waitingSince.IsZero() {
			waitingSince = now
		}
		if lastLog.IsZero() || now.Sub(lastLog) >= waitLogEvery {
			logger.Info("Another nodeguard agent holds the state directory's lock; waiting for it to exit", "path", path,
				"waited", now.Sub(waitingSince).Round(time.Second))
			lastLog = now
		}
		timer.Reset(retry)
	}
}

// Release gives the lock up. The lock file stays: removing it would let
// an agent lock a new file while another still holds the old one.
func (l *Lock) Release() error {
	if err := unlock(l.file); err != nil {
		_ = l.file.Close()
		return fmt.Errorf("releasing %s: %w", l.file.Name(), err)
	}
	return l.file.Close()
}
