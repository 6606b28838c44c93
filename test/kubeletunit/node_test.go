package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestNodeLeavesNothingOnTheHost runs the unit as a whole node
// (--node-namespace, --cgroup-root) around a stand-in kubelet that does
// what a container runtime's children do: it puts a process of its own in
// a cgroup below the node's and mounts a tmpfs. Once the unit is stopped,
// the process is dead, the node's cgroup is gone from every hierarchy, the
// host's mount table and the /proc/sys entry the unit covers are as they
// were.
func TestNodeLeavesNothingOnTheHost(t *testing.T) {
	if os.Geteuid() != 0 || cgroups.IsCgroup2UnifiedMode() {
		t.Skip("needs root and cgroup v1 hierarchies")
	}
	dir := t.TempDir()
	unitBin := filepath.Join(dir, "kubeletunit")
	if out, err := exec.Command("go", "build", "-o", unitBin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the unit: %v\n%s", err, out)
	}
	root := "/nodeguard-kubeletunit-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		// Should the unit have failed to, the test leaves nothing either.
		if m, err := cgroupManager(root); err == nil && m.Exists() {
			_ = killCgroup(m)
			_ = m.Destroy()
		}
	})
	mounts := func() int {
		all, err := mountinfo.GetMounts(nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	mountsBefore := mounts()
	overcommit, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if err != nil {
		t.Fatal(err)
	}
	other := "1"
	if strings.TrimSpace(string(overcommit)) == "1" {
		other = "0"
	}
	pidFile := filepath.Join(dir, "child.pid")
	// The stand-in: a child in a cgroup below the node's (in the devices
	// hierarchy, through which the unit finds them, and the memory one:
	// a new cpuset cgroup would need its CPUs set first), a tmpfs
	// mounted, and then it waits to be stopped.
	script := `set -e
sleep 600 & child=$!
for h in devices memory; do
  mkdir -p "/sys/fs/cgroup/$h` + root + `/pod" && echo $child > "/sys/fs/cgroup/$h` + root + `/pod/cgroup.procs"
done
echo $child > ` + pidFile + `
mkdir -p /var/lib/scratch && mount -t tmpfs none /var/lib/scratch
exec sleep 600`
	unit := exec.Command(unitBin, "serve", "--control="+filepath.Join(dir, "unit.sock"), "--journal="+filepath.Join(dir, "journal"),
		"--private-mounts", "--sysctl=vm/overcommit_memory="+other, "--node-namespace", "--cgroup-root="+root,
		"--", "/bin/sh", "-c", script)
	unit.Stdout, unit.Stderr = os.Stderr, os.Stderr
	unit.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := unit.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	waitFor(t, "the stand-in's child in the node's cgroup", func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return child > 0
	})
	if _, err := os.Stat("/sys/fs/cgroup/memory" + root + "/pod"); err != nil {
		t.Fatalf("the node's cgroup: %v", err)
	}
	if err := unit.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := unit.Wait(); err != nil {
		t.Fatalf("the unit: %v", err)
	}
	if framework.ProcessRunning(child) {
		_ = syscall.Kill(child, syscall.SIGKILL)
		t.Errorf("process %d, in the node's cgroup, outlived the node", child)
	}
	all, err := cgroups.GetCgroupMounts(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if _, err := os.Stat(filepath.Join(m.Mountpoint, root)); err == nil {
			t.Errorf("the node's cgroup is left in %s", m.Mountpoint)
		}
	}
	if after := mounts(); after != mountsBefore {
		t.Errorf("the host has %d mounts, had %d", after, mountsBefore)
	}
	if now, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err != nil || string(now) != string(overcommit) {
		t.Errorf("vm.overcommit_memory is %q (%v), was %q", now, err, overcommit)
	}
}
