//go:build !linux

package policy_test

import "time"

// threadCPUTime falls back to wall time where there is no thread CPU clock.
func threadCPUTime() time.Duration { return time.Duration(time.Now().UnixNano()) }
