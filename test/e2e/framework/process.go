package framework

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long a child gets between SIGTERM and SIGKILL.
const stopGrace = 20 * time.Second

// child is a process of a simulated node, in its own process group so that
// a Ctrl-C at the terminal reaches only the program in charge, which then
// stops its children in order.
type child struct {
	name string
	cmd  *exec.Cmd
	// exited is closed once the process has been reaped.
	exited chan struct{}
}

// startChild starts argv with its output appended to logPath.
func startChild(name, logPath string, argv ...string) (*child, error) {
	return startChildIn("", name, logPath, argv...)
}

// startChildIn is startChild with dir as the child's working directory
// ("" is ours).
func startChildIn(dir, name, logPath string, argv ...string) (*child, error) {
	return startChildWith(childOptions{dir: dir}, name, logPath, argv...)
}

// childOptions shape a child beyond its command line.
type childOptions struct {
	// dir is its working directory ("" is ours).
	dir string
	// env, when set, is its whole environment.
	env []string
	// ownMountNamespace starts it in a mount namespace of its own, every
	// mount private (unshare -m --propagation private).
	ownMountNamespace bool
}

func startChildWith(o childOptions, name, logPath string, argv ...string) (*child, error) {
	dir := o.dir
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the %s log: %w", name, err)
	}
	// The child holds its own descriptor once started.
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: if the program in charge dies without stopping us, the
	// child goes with it instead of holding ports forever.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = o.env
	if o.ownMountNamespace {
		// Go makes every mount of the new namespace private before the
		// child runs.
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// running reports whether the process has not exited yet.
func (c *child) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, SIGKILL after stopGrace, and
// returns once the process is reaped and nothing is left in its group.
func (c *child) stop() {
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-c.exited:
	case <-timer.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
	// A restart command the agent was running when it stopped, say.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
