package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nodeguard/nodeguard/test/freeport"
)

// stopGrace is how long a process gets to exit after SIGTERM before it is killed.
const stopGrace = 15 * time.Second

// process is one child (etcd or kube-apiserver) running in its own process group, so that
// stopping it also stops anything it started, with its output appended to a log file.
type process struct {
	name    string
	logPath string
	// logStart is where this run's output begins in the log, which earlier runs share.
	logStart int64
	cmd      *exec.Cmd
	// exited is closed once the child has been reaped; waitErr is set before that.
	exited  chan struct{}
	waitErr error
}

func startProcess(name, binary string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	// The child keeps its own copy of the descriptor; ours is not needed once it started.
	defer logFile.Close()
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "=== %s: starting %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))

	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the test binary dies without calling Stop, the child dies with it instead of
		// holding ports and data directories forever.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logStart: logStart, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// childEnv is our environment minus variables etcd would read as its own flags.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// hasExited reports whether the process has exited, and how.
func (p *process) hasExited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop asks the process group to terminate, kills it after stopGrace, and waits until the
// process is reaped, so that no child survives and its ports are free when stop returns.
func (p *process) stop() error {
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	var result error
	select {
	case <-p.exited:
	case <-timer.C:
		result = fmt.Errorf("%s did not exit within %s of SIGTERM; killed it", p.name, stopGrace)
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing %s: %w", p.name, err)
		}
		<-p.exited
	}
	// The leader is gone; take down anything it left in its group.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing what %s left behind: %w", p.name, err)
	}
	return result
}

// lostPortRace reports whether this run failed because a port chosen as free had been taken
// by someone else in the meantime.
func (p *process) lostPortRace() bool {
	f, err := os.Open(p.logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	const maxRead = 1 << 20
	data, err := io.ReadAll(io.NewSectionReader(f, p.logStart, maxRead))
	return err == nil && bytes.Contains(data, []byte("address already in use"))
}

// logTail returns about the last n lines of the process log.
func (p *process) logTail(n int) string {
	return tailFile(p.logPath, n)
}

func tailFile(path string, lines int) string {
	const maxRead = 64 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	offset := max(info.Size()-maxRead, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	all := bytes.Split(data, []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// freePorts returns n distinct loopback ports that were free a moment ago,
// below the ephemeral range (package freeport): no outgoing connection
// takes them before etcd or the apiserver binds them, or while the
// apiserver restarts on its port. Another process can still bind one first;
// Start notices and retries with fresh ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		port, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}
