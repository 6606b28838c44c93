package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// namespaceCommand is the hidden command that runs first inside the
// kubelet's new mount namespace: it mounts what the kubelet may scribble on,
// then becomes the kubelet.
const namespaceCommand = "__enter-namespace"

// hostPaths are covered with tmpfs in the kubelet's namespace: it creates
// /var/log/containers, /var/log/pods and /var/lib/kubelet/device-plugins
// whatever its root directory is.
var hostPaths = []string{"/var/log", "/var/lib"}

// writeSysctlFiles writes one file per sysctl holding the value the kubelet
// expects, and returns the bind mounts (source, target) that put them over
// /proc/sys, in a fixed order.
func writeSysctlFiles(dir string, sysctls map[string]string) ([][2]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the sysctl files' directory: %w", err)
	}
	keys := make([]string, 0, len(sysctls))
	for key := range sysctls {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var binds [][2]string
	for _, key := range keys {
		file := filepath.Join(dir, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(file, []byte(sysctls[key]+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("writing the file for sysctl %s: %w", key, err)
		}
		binds = append(binds, [2]string{file, filepath.Join("/proc/sys", key)})
	}
	return binds, nil
}

// prepareOverlays creates each overlay's upper and work directories (the
// work directory beside the upper one: overlayfs wants them on the same
// file system) and returns the overlays (host directory, upper directory),
// in a fixed order.
func prepareOverlays(overlays map[string]string) ([][2]string, error) {
	dirs := make([]string, 0, len(overlays))
	for dir := range overlays {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	var out [][2]string
	for _, dir := range dirs {
		upper := overlays[dir]
		for _, d := range []string{upper, upper + ".work"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("creating the overlay of %s: %w", dir, err)
			}
		}
		out = append(out, [2]string{dir, upper})
	}
	return out, nil
}

// helperArgs are the namespace helper's flags for binds and overlays.
func helperArgs(binds, overlays [][2]string) []string {
	var args []string
	for _, b := range binds {
		args = append(args, "--bind", b[0]+"="+b[1])
	}
	for _, o := range overlays {
		args = append(args, "--overlay", o[0]+"="+o[1])
	}
	return args
}

// enterNamespace runs in a fresh, private mount namespace: it mounts tmpfs
// over hostPaths, each --overlay over its host directory and each --bind
// source over its target, then executes the command after "--". Any failure
// exits before the kubelet could touch the host.
func enterNamespace(args []string) error {
	var binds, overlays [][2]string
	for len(args) > 0 && args[0] != "--" {
		if (args[0] != "--bind" && args[0] != "--overlay") || len(args) < 2 {
			return fmt.Errorf("%s: unexpected argument %q", namespaceCommand, args[0])
		}
		src, dst, ok := strings.Cut(args[1], "=")
		if !ok {
			return fmt.Errorf("%s: %s wants two paths joined by =, got %q", namespaceCommand, args[0], args[1])
		}
		if args[0] == "--bind" {
			binds = append(binds, [2]string{src, dst})
		} else {
			overlays = append(overlays, [2]string{src, dst})
		}
		args = args[2:]
	}
	if len(args) < 2 {
		return errors.New(namespaceCommand + ": no command after --")
	}
	argv := args[1:]
	unit := os.Getppid()
	if err := privateMountsOnly(); err != nil {
		return err
	}
	if err := mountLayout(binds, overlays); err != nil {
		return err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return execDyingWith(unit, path, argv)
}

// mountLayout mounts, in this process's mount namespace, tmpfs over
// hostPaths, each overlay (host directory, upper directory) and each bind
// (source, target).
func mountLayout(binds, overlays [][2]string) error {
	for _, path := range hostPaths {
		if err := syscall.Mount("tmpfs", path, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mounting tmpfs on %s: %w", path, err)
		}
	}
	for _, o := range overlays {
		dir, upper := o[0], o[1]
		data := "lowerdir=" + dir + ",upperdir=" + upper + ",workdir=" + upper + ".work"
		if err := syscall.Mount("overlay", dir, "overlay", 0, data); err != nil {
			return fmt.Errorf("mounting an overlay on %s: %w", dir, err)
		}
	}
	for _, b := range binds {
		if err := syscall.Mount(b[0], b[1], "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s over %s: %w", b[0], b[1], err)
		}
	}
	return nil
}

// execDyingWith executes path, as syscall.Exec does, as a program that gets
// SIGKILL when the unit, its parent, dies. The unit asked for that at the
// fork (Pdeathsig), but the kernel keeps it per thread and gives none to the
// threads the Go runtime starts later; and when a thread other than the
// first one executes, the new program is that thread, signal-less: a
// kubelet that outlives a killed unit. So the executing thread asks again,
// then checks that the unit has not died in the meantime.
func execDyingWith(unit int, path string, argv []string) error {
	// Never unlocked: this thread becomes the new program.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("asking for SIGKILL when the unit dies: %w", err)
	}
	if os.Getppid() != unit {
		return errors.New("the unit exited before the kubelet could start")
	}
	return syscall.Exec(path, argv, os.Environ())
}

// privateMountsOnly refuses to go on unless this process has a mount
// namespace of its own whose root mount does not propagate: the check that
// every later mount stays out of the host's.
func privateMountsOnly() error {
	return privateMountsOnlyAs(namespaceCommand)
}

// privateMountsOnlyAs is privateMountsOnly, its refusals naming who refuses.
func privateMountsOnlyAs(who string) error {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("reading this process's mount namespace: %w", err)
	}
	parent, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	switch {
	case err != nil && who == namespaceCommand:
		return fmt.Errorf("reading the unit's mount namespace: %w", err)
	case err != nil:
		// A unit whose starter has gone (adopted by an init it may not
		// inspect): the root mount's propagation, below, still tells.
	case self == parent:
		return errors.New(who + " must run in a new mount namespace (unshare(CLONE_NEWNS))")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mountinfo: %w", err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 6 && fields[4] == "/" {
			// Optional fields (shared:N, master:N) sit between field 6 and "-".
			for _, f := range fields[6:] {
				if f == "-" {
					break
				}
				if strings.HasPrefix(f, "shared:") {
					return errors.New(who + ": the root mount still propagates to the host")
				}
			}
		}
	}
	return nil
}
