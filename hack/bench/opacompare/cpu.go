package opacompare

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc's CPU times: fixed at 100 per second for
// user space on every Linux architecture, whatever the kernel's HZ.
const userHZ = 100

var errNoProcessCPU = errors.New("process CPU times are read from /proc, which this system lacks")

// processCPU is the CPU time (user and system, every thread) a process has
// used so far, to a hundredth of a second. On two shared cores the load
// generator takes CPU from the server it loads, so that throughput measures
// the machine as much as the server; what a server spends per request is
// its own.
func processCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		if _, statErr := os.Stat("/proc/self/stat"); statErr != nil {
			return 0, errNoProcessCPU
		}
	}
	if err != nil {
		return 0, fmt.Errorf("reading process %d's CPU time: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces; the fields
	// counted by proc(5) follow its closing parenthesis: state is field 3,
	// utime 14 and stime 15.
	closing := bytes.LastIndexByte(stat, ')')
	if closing < 0 {
		return 0, fmt.Errorf("process %d's stat has no command name: %q", pid, stat)
	}
	fields := bytes.Fields(stat[closing+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("process %d's stat has %d fields after the command name, want at least 13", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d's CPU time %q: %w", pid, f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
