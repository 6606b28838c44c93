package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeletunit serve|restart|stop|start|status [flags] (see go doc ./test/kubeletunit)")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serveCommand(args)
	case "restart", "stop", "start", "status":
		err = controlCommand(cmd, args)
	case namespaceCommand:
		err = enterNamespace(args)
	case cgroupCommand:
		err = enterCgroup(args)
	default:
		err = fmt.Errorf("unknown command %q (want serve, restart, stop, start or status)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeletunit:", err)
		os.Exit(1)
	}
}

// sysctlFlag collects repeated --sysctl key=value flags.
type sysctlFlag map[string]string

func (s sysctlFlag) String() string { return fmt.Sprint(map[string]string(s)) }

// stringsFlag collects a repeated flag's values.
type stringsFlag []string

func (s *stringsFlag) String() string { return fmt.Sprint(*s) }

func (s *stringsFlag) Set(value string) error {
	*s = append(*s, value)
	return nil
}

// overlayFlag collects repeated --overlay DIR=UPPER flags.
type overlayFlag map[string]string

func (o overlayFlag) String() string { return fmt.Sprint(map[string]string(o)) }

func (o overlayFlag) Set(value string) error {
	dir, upper, ok := strings.Cut(value, "=")
	if !ok || !filepath.IsAbs(dir) || upper == "" || filepath.Clean(dir) == "/" {
		return fmt.Errorf("want an absolute host directory other than / and a directory of this node, like /etc=/tmp/node/etc; got %q", value)
	}
	abs, err := filepath.Abs(upper)
	if err != nil {
		return fmt.Errorf("--overlay %q: %w", value, err)
	}
	o[filepath.Clean(dir)] = abs
	return nil
}

func (s sysctlFlag) Set(value string) error {
	key, val, ok := strings.Cut(value, "=")
	if !ok || key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return fmt.Errorf("want a /proc/sys path relative to /proc/sys and a value, like vm/overcommit_memory=1; got %q", value)
	}
	s[key] = val
	return nil
}

func serveCommand(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	opts := unitOptions{sysctls: sysctlFlag{}, overlays: overlayFlag{}}
	flags.StringVar(&opts.control, "control", "", "unix socket on which restart, stop, start and status are served (required)")
	flags.StringVar(&opts.journal, "journal", "", "file that gets a JSON line per start and exit of the kubelet (required)")
	flags.DurationVar(&opts.restartSec, "restart-sec", time.Second, "delay before an exited kubelet is started again (systemd's RestartSec=)")
	flags.IntVar(&opts.restartSteps, "restart-steps", 0, "consecutive quick exits over which the delay grows from --restart-sec to --restart-max-delay (RestartSteps=); 0 keeps it fixed")
	flags.DurationVar(&opts.restartMaxDelay, "restart-max-delay", 0, "the longest delay when --restart-steps is set (RestartMaxDelaySec=)")
	flags.DurationVar(&opts.stopTimeout, "stop-timeout", 20*time.Second, "how long a stopping kubelet gets between SIGTERM and SIGKILL (TimeoutStopSec=)")
	flags.StringVar(&opts.configFile, "config-file", "", "the kubelet's --config file, hashed into the journal at each start")
	flags.StringVar(&opts.configDir, "config-dir", "", "the kubelet's --config-dir, whose files are hashed into the journal at each start")
	flags.BoolVar(&opts.privateMounts, "private-mounts", false, "start the kubelet in a private mount namespace with tmpfs on /var/log and /var/lib and --sysctl files bind-mounted over /proc/sys")
	flags.Var(opts.sysctls, "sysctl", "with --private-mounts, a /proc/sys entry and the value the kubelet reads there, e.g. vm/overcommit_memory=1 (repeatable)")
	flags.BoolVar(&opts.node.namespace, "node-namespace", false, "with --private-mounts, make the mounts once, in the unit's own mount namespace (start the unit in one: unshare -m --propagation private), for everything it starts: the kubelet at each start and the container runtime share them, as on a node, and the runtime outlives kubelet restarts")
	flags.StringVar(&opts.node.cgroupRoot, "cgroup-root", "", "with --node-namespace, the node's cgroup (the kubelet's cgroupRoot), e.g. /nodeguard-node-a: created in every hierarchy at start; at stop every process left in it is killed and it is removed")
	flags.StringVar(&opts.node.containerd, "containerd", "", "with --node-namespace, run this containerd beside the kubelet (in CGROUP-ROOT/runtime, restarted if it exits), serving --containerd-address before the kubelet starts, and stopped after it")
	flags.StringVar(&opts.node.containerdConfig, "containerd-config", "", "containerd's --config")
	flags.StringVar(&opts.node.containerdAddress, "containerd-address", "", "the socket containerd serves (its grpc.address), waited for before the kubelet starts")
	flags.StringVar(&opts.node.containerdLog, "containerd-log", "", "the file containerd's output is appended to")
	flags.StringVar(&opts.node.ctr, "ctr", "", "containerd's ctr, for --containerd-import")
	flags.Var((*stringsFlag)(&opts.node.images), "containerd-import", "an image archive (an OCI layout in a tar) imported with ctr into containerd's k8s.io namespace once it serves, before the kubelet starts (repeatable)")
	flags.Var(opts.overlays, "overlay", "with --private-mounts, a host directory and a directory of this node, DIR=UPPER: in the kubelet's namespace DIR shows the host's files with UPPER's over them and takes the kubelet's writes (an overlay mount), e.g. /etc=node/etc for the hostPath volumes of pods under /etc (repeatable)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	opts.argv = flags.Args()
	if err := opts.validate(); err != nil {
		return err
	}
	u, err := newUnit(opts)
	if err != nil {
		return err
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	return u.run(signals)
}

func (o *unitOptions) validate() error {
	var errs []error
	if o.control == "" {
		errs = append(errs, errors.New("--control is required"))
	}
	if o.journal == "" {
		errs = append(errs, errors.New("--journal is required"))
	}
	if len(o.argv) == 0 {
		errs = append(errs, errors.New("the kubelet's command line goes after --"))
	}
	if o.restartSec < 0 || o.stopTimeout <= 0 {
		errs = append(errs, errors.New("--restart-sec must not be negative and --stop-timeout must be positive"))
	}
	if o.restartSteps < 0 || (o.restartSteps > 0 && o.restartMaxDelay < o.restartSec) {
		errs = append(errs, errors.New("--restart-steps must not be negative, and with it --restart-max-delay must be at least --restart-sec"))
	}
	if len(o.sysctls) > 0 && !o.privateMounts {
		errs = append(errs, errors.New("--sysctl needs --private-mounts: the host's own /proc/sys is never written"))
	}
	if len(o.overlays) > 0 && !o.privateMounts {
		errs = append(errs, errors.New("--overlay needs --private-mounts: the host's own directories are never written"))
	}
	errs = append(errs, o.node.validate(o.privateMounts)...)
	return errors.Join(errs...)
}

func controlCommand(cmd string, args []string) error {
	flags := flag.NewFlagSet(cmd, flag.ContinueOnError)
	control := flags.String("control", "", "the unit's control socket (required)")
	timeout := flags.Duration("timeout", time.Minute, "how long to wait for the unit's answer")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *control == "" || flags.NArg() > 0 {
		return errors.New("want --control SOCKET and no arguments")
	}
	answer, err := ask(*control, cmd, *timeout)
	if err != nil {
		return err
	}
	fmt.Println(answer)
	return nil
}
