package scale

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports; reading it needs
// sysconf(3), which would need cgo.
const clockTicks = 100

// procSample is a process's CPU time and resident memory at one moment.
type procSample struct {
	at      time.Time
	cpu     time.Duration
	rssByte int64
}

// readProc reads /proc/PID/stat (utime+stime) and /proc/PID/status (VmRSS).
func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("reading the stat of process %d: %w", pid, err)
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after its closing one.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return s, fmt.Errorf("process %d: malformed stat", pid)
	}
	fields := strings.Fields(string(stat[end+1:]))
	// fields[0] is field 3 (state): utime is field 14, stime 15.
	if len(fields) < 13 {
		return s, fmt.Errorf("process %d: short stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("process %d: unreadable CPU times in stat", pid)
	}
	s.cpu = time.Duration(utime+stime) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					s.rssByte = kb * 1024
				}
			}
		}
	}
	return s, nil
}

// findChild returns the pid of this process's child whose command name
// (comm, at most 15 bytes) is comm. The processes the harness starts are
// its direct children (test/controlplane and test/e2e/framework start them
// with exec), and the modes run one after another, so the name is unique.
func findChild(comm string) (int, error) {
	self := os.Getpid()
	entries, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	for _, path := range entries {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) < 2 || string(stat[open+1:end]) != comm {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == self {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			if err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no child process named %q", comm)
}

// ProcStats is one process's share of the window.
type ProcStats struct {
	// CPUPercent is CPU time over wall time: 100 is one core busy.
	CPUPercent float64 `json:"cpu_percent"`
	// RSSMiB is the resident set at the window's end.
	RSSMiB float64 `json:"rss_mib"`
}

func procStats(before, after procSample) ProcStats {
	wall := after.at.Sub(before.at)
	if wall <= 0 {
		return ProcStats{}
	}
	return ProcStats{
		CPUPercent: 100 * float64(after.cpu-before.cpu) / float64(wall),
		RSSMiB:     float64(after.rssByte) / (1 << 20),
	}
}

// renice sets the nice value of every thread of process pid: Linux keeps
// it per thread, and a Go program's threads are already running when the
// harness learns its PID (a thread started later inherits its creator's).
// Twice, for a thread started during the first pass.
func renice(pid, nice int) error {
	for range 2 {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("listing the threads of process %d: %w", pid, err)
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("setting the nice value of thread %d of process %d to %d: %w", tid, pid, nice, err)
			}
		}
	}
	return nil
}
