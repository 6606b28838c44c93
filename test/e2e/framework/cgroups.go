package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
)

// The cgroup v1 hierarchies the tests read.
const (
	cpusetHierarchy = "cpuset"
	memoryHierarchy = "memory"
	cpuHierarchy    = "cpu"
)

// CgroupRoot is the node's cgroup (the kubelet's cgroupRoot) on
// RuntimeContainerd.
func (n *Node) CgroupRoot() (string, error) {
	c, err := n.containerd()
	if err != nil {
		return "", err
	}
	return c.cgroupRoot, nil
}

func (n *Node) containerd() (*containerdNode, error) {
	k, ok := n.kubelet.(*realKubelet)
	if !ok || k.containerd == nil {
		return nil, fmt.Errorf("node %s does not run real containers (NodeOptions.Runtime %s)", n.Name, RuntimeContainerd)
	}
	return k.containerd, nil
}

// hierarchyDir is the directory of cgroup path in the v1 hierarchy of
// subsystem, as the host mounts it.
func hierarchyDir(subsystem, path string) (string, error) {
	mnt, err := cgroups.FindCgroupMountpoint("", subsystem)
	if err != nil {
		return "", fmt.Errorf("the %s cgroup hierarchy: %w", subsystem, err)
	}
	return filepath.Join(mnt, path), nil
}

// readCgroupFile reads a file of cgroup path in subsystem's hierarchy.
func readCgroupFile(subsystem, path, file string) (string, error) {
	dir, err := hierarchyDir(subsystem, path)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// Cgroup is a cgroup of a real-container node, as a path under each
// hierarchy's root.
type Cgroup struct {
	Path string
}

// CPUs is its cpuset.cpus: the CPUs its processes may run on.
func (c Cgroup) CPUs() (cpuset.CPUSet, error) {
	s, err := readCgroupFile(cpusetHierarchy, c.Path, "cpuset.cpus")
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	return cpuset.Parse(s)
}

// MemoryLimit is its memory.limit_in_bytes.
func (c Cgroup) MemoryLimit() (int64, error) {
	s, err := readCgroupFile(memoryHierarchy, c.Path, "memory.limit_in_bytes")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// CPUShares is its cpu.shares.
func (c Cgroup) CPUShares() (int64, error) {
	s, err := readCgroupFile(cpuHierarchy, c.Path, "cpu.shares")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// PIDs are the processes in it (its memory hierarchy's cgroup.procs), not
// those of cgroups below it.
func (c Cgroup) PIDs() ([]int, error) {
	dir, err := hierarchyDir(memoryHierarchy, c.Path)
	if err != nil {
		return nil, err
	}
	return cgroups.GetPids(dir)
}

// Kubepods is the cgroup the kubelet puts every pod under, whose limits are
// the node's allocatable (enforceNodeAllocatable: [pods]).
func (n *Node) Kubepods() (Cgroup, error) {
	root, err := n.CgroupRoot()
	if err != nil {
		return Cgroup{}, err
	}
	return Cgroup{Path: root + "/kubepods"}, nil
}

// ContainerCgroup finds the cgroup of a running container of pod on the
// node: the directory named after its container ID under kubepods.
func (n *Node) ContainerCgroup(pod *corev1.Pod, container string) (Cgroup, error) {
	id := ""
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			_, id, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	if id == "" {
		return Cgroup{}, fmt.Errorf("pod %s/%s reports no ID for container %s yet", pod.Namespace, pod.Name, container)
	}
	kubepods, err := n.Kubepods()
	if err != nil {
		return Cgroup{}, err
	}
	mnt, err := hierarchyDir(memoryHierarchy, "")
	if err != nil {
		return Cgroup{}, err
	}
	var found string
	err = filepath.WalkDir(filepath.Join(mnt, kubepods.Path), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == id {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return Cgroup{}, fmt.Errorf("looking for container %s's cgroup: %w", id, err)
	}
	if found == "" {
		return Cgroup{}, fmt.Errorf("no cgroup of container %s (pod %s/%s) under %s", id, pod.Namespace, pod.Name, kubepods.Path)
	}
	rel, err := filepath.Rel(mnt, found)
	if err != nil {
		return Cgroup{}, err
	}
	return Cgroup{Path: "/" + rel}, nil
}

// ProcessCPUs are the CPUs the kernel lets process pid run on.
func ProcessCPUs(pid int) (cpuset.CPUSet, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("the CPU affinity of process %d: %w", pid, err)
	}
	var cpus []int
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpuset.New(cpus...), nil
}

// ProcessRunning reports whether process pid exists and has not exited.
func ProcessRunning(pid int) bool {
	err := unix.Kill(pid, 0)
	if err != nil {
		return errors.Is(err, unix.EPERM)
	}
	// A zombie has exited: its state says so.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// Leftovers lists what a stopped node left on the host: a cgroup of its in
// any hierarchy, a process (containerd, a shim, a container) that names its
// directories or sits in its cgroup, a mount under its directories in the
// host's mount table. Empty is what Stop promises.
func (n *Node) Leftovers(ctx context.Context) ([]string, error) {
	k, ok := n.kubelet.(*realKubelet)
	if !ok {
		return nil, fmt.Errorf("node %s runs the stub", n.Name)
	}
	var left []string
	dirs := []string{k.socketDir, n.Dir}
	root := ""
	if k.containerd != nil {
		root = k.containerd.cgroupRoot
		mounts, err := cgroups.GetCgroupMounts(true)
		if err != nil {
			return nil, err
		}
		for _, m := range mounts {
			if _, err := os.Stat(filepath.Join(m.Mountpoint, root)); err == nil {
				left = append(left, "cgroup "+filepath.Join(m.Mountpoint, root))
			}
		}
	}
	mounts, err := mountinfo.GetMounts(func(info *mountinfo.Info) (skip, stop bool) {
		for _, d := range dirs {
			if info.Mountpoint == d || strings.HasPrefix(info.Mountpoint, d+"/") {
				return false, false
			}
		}
		return true, false
	})
	if err != nil {
		return nil, fmt.Errorf("reading the host's mounts: %w", err)
	}
	for _, m := range mounts {
		left = append(left, "mount "+m.Mountpoint+" ("+m.FSType+")")
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.ReplaceAll(string(cmdline), "\x00", " ")
		named := false
		for _, d := range dirs {
			named = named || strings.Contains(args, d+"/")
		}
		inCgroup := false
		if root != "" {
			if cg, err := cgroups.ParseCgroupFile(filepath.Join("/proc", p.Name(), "cgroup")); err == nil {
				for _, path := range cg {
					inCgroup = inCgroup || path == root || strings.HasPrefix(path, root+"/")
				}
			}
		}
		if (named || inCgroup) && ProcessRunning(pid) {
			left = append(left, fmt.Sprintf("process %d: %s", pid, strings.TrimSpace(args)))
		}
	}
	return left, ctx.Err()
}

// CPUManagerState is the kubelet's checkpoint of its CPU manager
// (cpu_manager_state under its root directory).
type CPUManagerState struct {
	PolicyName    string `json:"policyName"`
	DefaultCPUSet string `json:"defaultCpuSet"`
	// Entries are the exclusive CPUs of each container, by pod UID and
	// container name.
	Entries map[string]map[string]string `json:"entries,omitempty"`
}

// CPUManagerState reads the real kubelet's cpu_manager_state.
func (n *Node) CPUManagerState() (CPUManagerState, error) {
	var st CPUManagerState
	root, err := n.KubeletRootDir()
	if err != nil {
		return st, err
	}
	data, err := os.ReadFile(filepath.Join(root, "cpu_manager_state"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("node %s: cpu_manager_state: %w", n.Name, err)
	}
	return st, nil
}
