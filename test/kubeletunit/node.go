package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
)

// cgroupCommand is the hidden command that puts itself into a cgroup, in
// every hierarchy, then becomes the container runtime: nothing the runtime
// starts (its shims, and through them the containers' first processes)
// begins outside the node's cgroup.
const cgroupCommand = "__enter-cgroup"

// runtimeReadyTimeout bounds the wait for the container runtime's socket.
const runtimeReadyTimeout = time.Minute

// nodeOptions are the flags of a unit that is a whole node rather than the
// kubelet alone: one mount namespace for the unit and all it starts, a
// cgroup of the node's own, and a container runtime beside the kubelet.
type nodeOptions struct {
	// namespace is --node-namespace.
	namespace bool
	// cgroupRoot is --cgroup-root, a cgroup path such as /nodeguard-x.
	cgroupRoot string
	// containerd, containerdConfig, containerdAddress and containerdLog
	// are the runtime's binary, its --config, the socket it serves and
	// the file its output goes to.
	containerd, containerdConfig, containerdAddress, containerdLog string
	// ctr and images: once containerd serves, each image archive is
	// imported with ctr into the CRI's namespace before the kubelet
	// starts (as a node image comes with its images preloaded), so that
	// nothing is ever pulled.
	ctr    string
	images []string
}

func (o nodeOptions) enabled() bool { return o.namespace }

func (o nodeOptions) validate(privateMounts bool) []error {
	var errs []error
	if o.namespace && !privateMounts {
		errs = append(errs, errors.New("--node-namespace needs --private-mounts"))
	}
	if !o.namespace && (o.cgroupRoot != "" || o.containerd != "") {
		errs = append(errs, errors.New("--cgroup-root and --containerd need --node-namespace"))
	}
	if o.cgroupRoot != "" && (!path.IsAbs(o.cgroupRoot) || path.Clean(o.cgroupRoot) == "/" || path.Clean(o.cgroupRoot) != o.cgroupRoot) {
		errs = append(errs, fmt.Errorf("--cgroup-root %q: want a clean absolute cgroup path other than /, like /nodeguard-node-a", o.cgroupRoot))
	}
	if o.containerd != "" && (o.cgroupRoot == "" || o.containerdConfig == "" || o.containerdAddress == "" || o.containerdLog == "") {
		errs = append(errs, errors.New("--containerd needs --cgroup-root, --containerd-config, --containerd-address and --containerd-log"))
	}
	if len(o.images) > 0 && (o.containerd == "" || o.ctr == "") {
		errs = append(errs, errors.New("--containerd-import needs --containerd and --ctr"))
	}
	return errs
}

// node is what a unit with --node-namespace runs beside the kubelet.
type node struct {
	opts        nodeOptions
	stopTimeout time.Duration
	// root manages the node's cgroup in every hierarchy; nil without
	// --cgroup-root. made says it was created, and is the unit's to remove.
	root *fs.Manager
	made bool

	runtime      *exec.Cmd
	runtimeExits chan exit
}

func newNode(opts nodeOptions, stopTimeout time.Duration) (*node, error) {
	n := &node{opts: opts, stopTimeout: stopTimeout, runtimeExits: make(chan exit, 1)}
	if opts.cgroupRoot != "" {
		var err error
		if n.root, err = cgroupManager(opts.cgroupRoot); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// cgroupManager manages path in every cgroup v1 hierarchy (and the unified
// one of a hybrid host), the way runc does a container's.
func cgroupManager(path string) (*fs.Manager, error) {
	if cgroups.IsCgroup2UnifiedMode() {
		return nil, errors.New("--cgroup-root: this host mounts cgroup v2 only; the test nodes' kubelets run on cgroup v1 (failCgroupV1: false)")
	}
	// Resources are only for Set, which is never called: the node's cgroup
	// limits nothing, and devices (whose tree GetAllPids walks) allows all.
	m, err := fs.NewManager(&cgroups.Cgroup{Path: path, Resources: &cgroups.Resources{}}, nil)
	if err != nil {
		return nil, fmt.Errorf("the cgroup %s: %w", path, err)
	}
	return m, nil
}

// up makes the node: in the unit's own mount namespace, the mounts of
// --private-mounts; the node's cgroup; and the container runtime, started
// in its cgroup and serving its socket before up returns.
func (n *node) up(binds, overlays [][2]string) error {
	if err := privateMountsOnlyAs("kubeletunit serve --node-namespace"); err != nil {
		return fmt.Errorf("%w: start it in a mount namespace of its own, e.g. unshare -m --propagation private", err)
	}
	if err := mountLayout(binds, overlays); err != nil {
		return err
	}
	if n.root != nil {
		// -1: create the cgroup everywhere, join nothing.
		n.made = true
		if err := n.root.Apply(-1); err != nil {
			return fmt.Errorf("creating the node's cgroup %s: %w", n.opts.cgroupRoot, err)
		}
	}
	if n.opts.containerd == "" {
		return nil
	}
	if err := n.startRuntime(); err != nil {
		return err
	}
	if err := n.waitRuntime(); err != nil {
		return err
	}
	for _, archive := range n.opts.images {
		// The CRI plugin's namespace; its pinned sandbox image among them.
		out, err := exec.Command(n.opts.ctr, "--address", n.opts.containerdAddress, "--namespace", "k8s.io", "images", "import", archive).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s into containerd: %w: %s", archive, err, out)
		}
	}
	return nil
}

// waitRuntime waits until containerd accepts connections on its socket.
func (n *node) waitRuntime() error {
	deadline := time.Now().Add(runtimeReadyTimeout)
	for {
		conn, err := net.DialTimeout("unix", n.opts.containerdAddress, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case ex := <-n.runtimeExits:
			return fmt.Errorf("containerd exited before it served %s: %s (its log: %s)", n.opts.containerdAddress, ex.state, n.opts.containerdLog)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not serve %s within %v (its log: %s)", n.opts.containerdAddress, runtimeReadyTimeout, n.opts.containerdLog)
		}
	}
}

// runtimeCgroup is the cgroup containerd, and so its shims, run in: a
// sibling of the kubelet's kubepods, as system.slice is on a node.
func (n *node) runtimeCgroup() string { return n.opts.cgroupRoot + "/runtime" }

func (n *node) startRuntime() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program for the cgroup helper: %w", err)
	}
	log, err := os.OpenFile(n.opts.containerdLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening containerd's log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(self, cgroupCommand, n.runtimeCgroup(), "--", n.opts.containerd, "--config", n.opts.containerdConfig)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting containerd: %w", err)
	}
	n.runtime = cmd
	go func() {
		_ = cmd.Wait()
		n.runtimeExits <- exit{cmd: cmd, state: cmd.ProcessState}
	}()
	return nil
}

// exited delivers the container runtime's unexpected exit; nil (never) for
// a unit that runs none.
func (n *node) exited() <-chan exit {
	if n == nil {
		return nil
	}
	return n.runtimeExits
}

// runtimeExited starts the runtime again, as Restart=always does
// containerd.service; its containers run on meanwhile (their shims do not
// depend on it).
func (n *node) runtimeExited(ex exit) {
	if ex.cmd != n.runtime {
		return
	}
	n.runtime = nil
	fmt.Fprintf(os.Stderr, "kubeletunit: containerd (pid %d) exited (%s); restarting it\n", ex.cmd.Process.Pid, ex.state)
	time.Sleep(time.Second)
	if err := n.startRuntime(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeletunit:", err)
	}
}

// shutdown ends the node as a powered-off machine ends it: the runtime is
// stopped, then every process left in the node's cgroup (containers,
// shims) is killed and the cgroup removed in every hierarchy. The mounts
// go with the unit's namespace when the unit exits.
func (n *node) shutdown() {
	if cmd := n.runtime; cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-n.runtimeExits:
		case <-time.After(n.stopTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-n.runtimeExits
		}
		n.runtime = nil
	}
	if n.root == nil || !n.made {
		return
	}
	if err := killCgroup(n.root); err != nil {
		fmt.Fprintln(os.Stderr, "kubeletunit: emptying the node's cgroup:", err)
	}
	if err := n.root.Destroy(); err != nil {
		fmt.Fprintf(os.Stderr, "kubeletunit: removing the node's cgroup %s: %v\n", n.opts.cgroupRoot, err)
	}
}

// killCgroup kills every process in m's cgroup and below, frozen first so
// that none forks meanwhile, and waits until none is left.
func killCgroup(m *fs.Manager) error {
	if err := m.Freeze(cgroups.Frozen); err != nil {
		fmt.Fprintln(os.Stderr, "kubeletunit: freezing the node's cgroup (killing without):", err)
	}
	pids, err := m.GetAllPids()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := m.Freeze(cgroups.Thawed); err != nil {
		return fmt.Errorf("thawing the node's cgroup: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := m.GetAllPids()
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v are still in it", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enterCgroup joins the cgroup given (in every hierarchy), then executes
// the command after "--" as one that dies with the unit.
func enterCgroup(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return errors.New(cgroupCommand + ": want CGROUP -- COMMAND [ARGS...]")
	}
	unit := os.Getppid()
	m, err := cgroupManager(args[0])
	if err != nil {
		return err
	}
	if err := m.Apply(os.Getpid()); err != nil {
		return fmt.Errorf("%s: joining %s: %w", cgroupCommand, args[0], err)
	}
	argv := args[2:]
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return execDyingWith(unit, path, argv)
}
