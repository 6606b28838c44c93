package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// stableRun is how long a run must last for the next exit to count as the
// first of a new series, resetting the restart delay.
const stableRun = 10 * time.Second

type unitOptions struct {
	control, journal      string
	restartSec            time.Duration
	restartSteps          int
	restartMaxDelay       time.Duration
	stopTimeout           time.Duration
	configFile, configDir string
	privateMounts         bool
	node                  nodeOptions
	sysctls               sysctlFlag
	overlays              overlayFlag
	argv                  []string
}

// Entry is one line of the journal.
type Entry struct {
	Time time.Time `json:"time"`
	// Event is "start" or "exit".
	Event string `json:"event"`
	PID   int    `json:"pid"`
	// Cause, on a start: "start" (the unit's first, or a start command),
	// "restart" (a restart command) or "auto-restart" (Restart=always after
	// an exit).
	Cause string `json:"cause,omitempty"`
	// ConfigSHA256, on a start, hashes --config-file; ConfigDirSHA256 the
	// names and contents of the files in --config-dir.
	ConfigSHA256 string `json:"configSHA256,omitempty"`
	// Asked, on a start a command asked for, is when the command arrived:
	// before the old kubelet was stopped.
	Asked           *time.Time `json:"asked,omitempty"`
	ConfigDirSHA256 string     `json:"configDirSHA256,omitempty"`
	// ExitCode, on an exit, is the exit status, or -1 when a signal ended
	// it (Signal names it).
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// Requested, on an exit, is true when a stop or restart asked for it.
	Requested bool `json:"requested,omitempty"`
}

type exit struct {
	cmd   *exec.Cmd
	state *os.ProcessState
}

type unit struct {
	opts    unitOptions
	journal *os.File
	// binds (sysctl file, /proc/sys entry) and overlays (host directory,
	// node's directory) are what --private-mounts mounts.
	binds, overlays [][2]string
	// node, with --node-namespace, is the node's shared mount namespace,
	// cgroup and container runtime; nil otherwise.
	node *node

	requests chan request
	exits    chan exit

	// proc is the running kubelet, nil when none runs.
	proc      *exec.Cmd
	started   time.Time
	stopAsked bool
	// wanted is the unit's state as systemd sees it: active (restart on
	// exit) or stopped by a command.
	wanted bool
	// quickExits counts consecutive exits of short runs, for the delay.
	quickExits int
	timer      *time.Timer
}

func newUnit(opts unitOptions) (*unit, error) {
	journal, err := os.OpenFile(opts.journal, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	u := &unit{opts: opts, journal: journal, requests: make(chan request), exits: make(chan exit, 1)}
	if opts.privateMounts {
		binds, err := writeSysctlFiles(filepath.Join(filepath.Dir(opts.journal), "kubeletunit-sysctls"), opts.sysctls)
		if err != nil {
			journal.Close()
			return nil, err
		}
		overlays, err := prepareOverlays(opts.overlays)
		if err != nil {
			journal.Close()
			return nil, err
		}
		u.binds, u.overlays = binds, overlays
	}
	if opts.node.enabled() {
		if u.node, err = newNode(opts.node, opts.stopTimeout); err != nil {
			journal.Close()
			return nil, err
		}
	}
	return u, nil
}

// run starts the kubelet and serves the control socket until a signal
// arrives, then stops the kubelet.
func (u *unit) run(signals <-chan os.Signal) error {
	defer u.journal.Close()
	listener, err := listen(u.opts.control, u.requests)
	if err != nil {
		return err
	}
	defer listener.Close()
	if u.node != nil {
		// The node comes up before its kubelet (After=containerd.service),
		// and goes, with everything it runs, after it.
		defer u.node.shutdown()
		if err := u.node.up(u.binds, u.overlays); err != nil {
			return err
		}
	}
	u.wanted = true
	if err := u.start("start", nil); err != nil {
		fmt.Fprintln(os.Stderr, "kubeletunit:", err)
		u.scheduleRestart()
	}
	for {
		var timerC <-chan time.Time
		if u.timer != nil {
			timerC = u.timer.C
		}
		select {
		case <-signals:
			u.stop()
			return nil
		case req := <-u.requests:
			req.reply <- u.handle(req.command, time.Now())
		case ex := <-u.exits:
			u.exited(ex)
		case ex := <-u.node.exited():
			u.node.runtimeExited(ex)
		case <-timerC:
			u.timer = nil
			if u.wanted && u.proc == nil {
				if err := u.start("auto-restart", nil); err != nil {
					fmt.Fprintln(os.Stderr, "kubeletunit:", err)
					u.scheduleRestart()
				}
			}
		}
	}
}

func (u *unit) handle(command string, asked time.Time) string {
	switch command {
	case "status":
		if u.proc != nil {
			return fmt.Sprintf("ok active %d", u.proc.Process.Pid)
		}
		if u.wanted {
			return "ok activating"
		}
		return "ok inactive"
	case "stop":
		u.wanted = false
		u.cancelTimer()
		u.stop()
		return "ok inactive"
	case "start", "restart":
		// A start or restart command resets the restart counter, as
		// `systemctl restart` does.
		u.wanted = true
		u.quickExits = 0
		u.cancelTimer()
		if command == "start" && u.proc != nil {
			return fmt.Sprintf("ok active %d", u.proc.Process.Pid)
		}
		u.stop()
		if err := u.start(command, &asked); err != nil {
			u.scheduleRestart()
			return "error " + err.Error()
		}
		return fmt.Sprintf("ok active %d", u.proc.Process.Pid)
	default:
		return fmt.Sprintf("error unknown command %q", command)
	}
}

func (u *unit) start(cause string, asked *time.Time) error {
	argv := u.opts.argv
	cmd := exec.Command(argv[0], argv[1:]...)
	// In the node's namespace (--node-namespace) the kubelet starts as a
	// plain child, sharing the unit's mounts; otherwise each start gets a
	// namespace of its own from the helper.
	if u.opts.privateMounts && u.node == nil {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this program for the namespace helper: %w", err)
		}
		helper := append([]string{namespaceCommand}, helperArgs(u.binds, u.overlays)...)
		helper = append(append(helper, "--"), argv...)
		cmd = exec.Command(self, helper...)
	}
	// Its own process group, signalled whole on stop as systemd's
	// KillMode=control-group does; and gone with the unit if the unit is
	// killed, instead of holding its ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if u.opts.privateMounts && u.node == nil {
		// Go makes every mount of the new namespace private before the
		// helper runs, so nothing mounted there propagates to the host.
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	entry := Entry{Event: "start", Cause: cause, Asked: asked, ConfigSHA256: hashFile(u.opts.configFile), ConfigDirSHA256: hashDir(u.opts.configDir)}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the kubelet: %w", err)
	}
	u.proc, u.started, u.stopAsked = cmd, time.Now(), false
	entry.Time, entry.PID = u.started, cmd.Process.Pid
	u.record(entry)
	go func() {
		_ = cmd.Wait()
		u.exits <- exit{cmd: cmd, state: cmd.ProcessState}
	}()
	return nil
}

// stop ends the running kubelet, if any, and waits for it.
func (u *unit) stop() {
	if u.proc == nil {
		return
	}
	u.stopAsked = true
	pgid := u.proc.Process.Pid
	// SIGCONT after SIGTERM, as systemd sends them: a stopped (frozen)
	// kubelet gets its SIGTERM too.
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	timer := time.NewTimer(u.opts.stopTimeout)
	defer timer.Stop()
	for u.proc != nil {
		select {
		case ex := <-u.exits:
			u.exited(ex)
		case <-timer.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	// What is left of the group once the kubelet is gone.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (u *unit) exited(ex exit) {
	if ex.cmd != u.proc {
		return
	}
	code := ex.state.ExitCode()
	entry := Entry{Time: time.Now(), Event: "exit", PID: ex.cmd.Process.Pid, ExitCode: &code, Requested: u.stopAsked}
	if ws, ok := ex.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		entry.Signal = ws.Signal().String()
	}
	u.record(entry)
	ran := time.Since(u.started)
	u.proc = nil
	if u.stopAsked || !u.wanted {
		return
	}
	if ran >= stableRun {
		u.quickExits = 0
	}
	delay := u.scheduleRestart()
	fmt.Fprintf(os.Stderr, "kubeletunit: the kubelet (pid %d) exited after %v (%s); restarting in %v\n",
		entry.PID, ran.Round(time.Millisecond), ex.state, delay)
}

func (u *unit) scheduleRestart() time.Duration {
	u.cancelTimer()
	delay := restartDelay(u.opts, u.quickExits)
	u.timer = time.NewTimer(delay)
	u.quickExits++
	return delay
}

func (u *unit) cancelTimer() {
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
}

// restartDelay is the wait before the auto-restart that follows n earlier
// consecutive quick exits: --restart-sec, growing geometrically over
// --restart-steps to --restart-max-delay, as systemd interpolates between
// RestartSec= and RestartMaxDelaySec=.
func restartDelay(opts unitOptions, n int) time.Duration {
	if opts.restartSteps == 0 || opts.restartSec <= 0 || n == 0 {
		return opts.restartSec
	}
	if n >= opts.restartSteps {
		return opts.restartMaxDelay
	}
	ratio := float64(opts.restartMaxDelay) / float64(opts.restartSec)
	return time.Duration(float64(opts.restartSec) * math.Pow(ratio, float64(n)/float64(opts.restartSteps)))
}

func (u *unit) record(e Entry) {
	line, err := json.Marshal(e)
	if err == nil {
		_, err = u.journal.Write(append(line, '\n'))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeletunit: writing the journal:", err)
	}
}

func hashFile(path string) string {
	if path == "" {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "missing"
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// hashDir hashes the names and contents of dir's regular files, in order.
func hashDir(dir string) string {
	if dir == "" {
		return ""
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "missing"
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "unreadable"
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
