// Command workload is the one program in the image that the tests' real-container nodes run
// (framework.WorkloadImage): the pod sandbox's pause container, and the test workloads. It
// stays small and static, so that the image is one file built from this source.
//
// With no flags it is a pause container: it sleeps, reaps what it inherits, and exits 0 on
// SIGTERM or SIGINT. The flags make it a workload that does, until it is stopped:
//
//	--burn-cpus N   keep N goroutines busy, each spinning on a CPU it is allowed
//	--alloc-mib N   allocate N MiB and touch every page, so that it counts against the cgroup
//	--write DIR     write DIR/heartbeat every second: its PID and a count, so that a test sees
//	                from the host that it runs and where (an emptyDir, say)
//	--report        print, at start and on SIGUSR1, what the kernel says about its placement:
//	                its cgroups, the CPUs it may run on, its memory cgroup's limit
//
// Every line it prints starts with "workload:", for a test that reads the container's log.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	burn := flag.Int("burn-cpus", 0, "goroutines to keep busy, each spinning")
	allocMiB := flag.Int("alloc-mib", 0, "MiB to allocate and touch, held until it exits")
	write := flag.String("write", "", "directory in which to write a heartbeat file every second")
	report := flag.Bool("report", false, "print its cgroups, allowed CPUs and memory limit at start and on SIGUSR1")
	flag.Parse()
	if flag.NArg() > 0 || *burn < 0 || *allocMiB < 0 {
		fmt.Fprintln(os.Stderr, "workload: unexpected arguments (see the package's doc)")
		os.Exit(2)
	}

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD, syscall.SIGUSR1)

	var stop atomic.Bool
	for range *burn {
		go func() {
			for n := 0; !stop.Load(); n++ {
				_ = n * n
			}
		}()
	}
	var held []byte
	if *allocMiB > 0 {
		held = make([]byte, *allocMiB<<20)
		for i := 0; i < len(held); i += os.Getpagesize() {
			held[i] = 1
		}
		fmt.Printf("workload: holding %d MiB\n", *allocMiB)
	}
	if *report {
		printReport()
	}
	var tick <-chan time.Time
	if *write != "" {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		tick = ticker.C
	}
	beats := 0
	for {
		select {
		case <-tick:
			beats++
			if err := heartbeat(*write, beats); err != nil {
				fmt.Fprintln(os.Stderr, "workload:", err)
			}
		case sig := <-signals:
			switch sig {
			case syscall.SIGCHLD:
				reap()
			case syscall.SIGUSR1:
				printReport()
			default:
				stop.Store(true)
				fmt.Printf("workload: %v, exiting (held %d bytes)\n", sig, len(held))
				os.Exit(0)
			}
		}
	}
}

// heartbeat replaces dir/heartbeat with "PID COUNT\n", by rename, so that a reader never sees
// half of it.
func heartbeat(dir string, beats int) error {
	tmp := filepath.Join(dir, ".heartbeat.tmp")
	line := strconv.Itoa(os.Getpid()) + " " + strconv.Itoa(beats) + "\n"
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return fmt.Errorf("writing the heartbeat: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "heartbeat")); err != nil {
		return fmt.Errorf("writing the heartbeat: %w", err)
	}
	return nil
}

// reap collects every exited child: as a pod's first process it may inherit orphans.
func reap() {
	for {
		var status unix.WaitStatus
		pid, err := unix.Wait4(-1, &status, unix.WNOHANG, nil)
		if pid <= 0 || errors.Is(err, unix.ECHILD) {
			return
		}
	}
}

// printReport prints what the kernel says: /proc/self/cgroup as it is, the CPUs the scheduler
// may run it on, and the limit of its memory cgroup as the container sees it.
func printReport() {
	fmt.Printf("workload: pid %d\n", os.Getpid())
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			fmt.Printf("workload: cgroup %s\n", line)
		}
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		var cpus []string
		for cpu := range 1024 {
			if set.IsSet(cpu) {
				cpus = append(cpus, strconv.Itoa(cpu))
			}
		}
		fmt.Printf("workload: cpus allowed %s\n", strings.Join(cpus, ","))
	}
	if data, err := os.ReadFile("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		fmt.Printf("workload: memory limit %s\n", strings.TrimSpace(string(data)))
	}
}
