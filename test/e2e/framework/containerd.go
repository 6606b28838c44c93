package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// ContainerRuntime is what a real kubelet runs its pods on.
type ContainerRuntime string

const (
	// RuntimeFake is the kubelet's own fake CRI (fakecri): pods go Running
	// and nothing executes, no cgroup is made. The default: faster, and
	// enough wherever nothing depends on cgroups or processes.
	RuntimeFake ContainerRuntime = "fakecri"
	// RuntimeContainerd is containerd with runc: pods' containers are
	// processes in cgroups under the node's own cgroup root.
	RuntimeContainerd ContainerRuntime = "containerd"
)

// ContainerBinaries are what a node on RuntimeContainerd runs beside the
// kubelet: containerd and its tools, built by hack/testbin.sh, and the
// archive of WorkloadImage, imported into each node's containerd.
type ContainerBinaries struct {
	Containerd, Ctr, Shim, Runc string
	// WorkloadImageArchive is WorkloadImage as an OCI layout in a tar.
	WorkloadImageArchive string
}

// BuildContainerBinaries finds containerd, ctr, containerd-shim-runc-v2 and
// runc in the binary directory and builds WorkloadImage into dir. It fails,
// saying why, where real containers cannot run (ContainersSupported).
func BuildContainerBinaries(ctx context.Context, dir string) (ContainerBinaries, error) {
	var b ContainerBinaries
	if err := ContainersSupported(); err != nil {
		return b, err
	}
	for name, dest := range map[string]*string{"containerd": &b.Containerd, "ctr": &b.Ctr, "containerd-shim-runc-v2": &b.Shim, "runc": &b.Runc} {
		path, err := controlplane.Binary(name)
		if err != nil {
			return b, err
		}
		*dest = path
	}
	var err error
	b.WorkloadImageArchive, err = buildWorkloadImage(ctx, dir)
	return b, err
}

// ContainersSupported says why this machine cannot run RuntimeContainerd
// nodes, or nil: they need root and cgroup v1 hierarchies (the kubelets
// here run with failCgroupV1: false).
func ContainersSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("real containers need root (runc makes namespaces and cgroups)")
	}
	if cgroups.IsCgroup2UnifiedMode() {
		return errors.New("real containers here need cgroup v1 hierarchies; this host mounts cgroup v2 only")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpuset"); err != nil {
		return fmt.Errorf("real containers need the cpuset cgroup hierarchy: %w", err)
	}
	return nil
}

// containerdNode is the containerd of one node: its configuration, state
// and sockets all under the node's directories, nothing under the host's
// /run/containerd or /var/lib/containerd.
type containerdNode struct {
	// dir holds containerd's root, state, configuration and log.
	dir string
	// address is its gRPC socket, under the kubelet's short socket
	// directory (unix socket paths are limited to 108 bytes).
	address string
	// shimDir holds the shims' sockets: at most 42 characters.
	shimDir string
	// cgroupRoot is the node's cgroup, the kubelet's cgroupRoot.
	cgroupRoot string
	bins       ContainerBinaries
}

func newContainerdNode(nodeName, nodeDir, socketDir string, bins ContainerBinaries) (*containerdNode, error) {
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	c := &containerdNode{
		dir:     filepath.Join(nodeDir, "containerd"),
		address: filepath.Join(socketDir, "containerd.sock"),
		shimDir: filepath.Join(socketDir, "s"),
		// Unique per start of the node, so that two runs never share
		// one; NodeCgroupPrefix lets a test find them all.
		cgroupRoot: "/" + NodeCgroupPrefix + nodeName + "-" + hex.EncodeToString(suffix),
		bins:       bins,
	}
	if len(c.shimDir) > 42 {
		return nil, fmt.Errorf("containerd's shim socket directory %s is longer than the 42 characters it allows", c.shimDir)
	}
	return c, nil
}

// NodeCgroupPrefix begins the name of every real-container node's cgroup
// root (in every hierarchy, directly under the hierarchy's root): nothing
// else the tests make in the host's cgroups.
const NodeCgroupPrefix = "nodeguard-e2e-"

// writeConfig writes containerd's configuration (version 4), the CNI
// configuration and the registry hosts it reads, and returns the config
// file's path.
func (c *containerdNode) writeConfig() (string, error) {
	hosts := filepath.Join(c.dir, "certs.d")
	cniConf, cniBin := filepath.Join(c.dir, "cni", "net.d"), filepath.Join(c.dir, "cni", "bin")
	for _, d := range []string{hosts, cniConf, cniBin, c.shimDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("containerd's directories: %w", err)
		}
	}
	// Every registry is this address, where nothing listens: an image
	// that is not imported (the shipped manifests' pods, say) fails to
	// pull without a packet leaving the machine.
	if err := writeFile(filepath.Join(hosts, "_default", "hosts.toml"), "server = \"http://127.0.0.1:9\"\n"); err != nil {
		return "", err
	}
	// The pods here use the host's network (hostNetwork: true): a pod
	// network would mean bridges, veths and routes on the host. The CRI
	// plugin and the kubelet still want a network configuration before
	// they call the runtime network ready (the Node Ready), so there is
	// one, whose plugin does not exist: a pod that asks for a network of
	// its own fails to start, saying so.
	conflist := `{"cniVersion": "1.0.0", "name": "host-network-only", "plugins": [{"type": "nodeguard-no-pod-network"}]}` + "\n"
	if err := writeFile(filepath.Join(cniConf, "10-host-network-only.conflist"), conflist); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`version = 4
root = %[1]q
state = %[2]q
# Nothing from the host's /etc/containerd.
imports = []
# Plugins that would reach outside the node's directories, or need
# hardware or kernel features this host has not.
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs", "io.containerd.snapshotter.v1.blockfile"]

[plugins.'io.containerd.server.v1.grpc']
  address = %[3]q

[plugins.'io.containerd.server.v1.ttrpc']
  address = %[4]q

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = %[5]q

[plugins.'io.containerd.transfer.v1.local']
  config_path = %[7]q

[plugins.'io.containerd.image-verifier.v1.bindir']
  bin_dir = %[12]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[7]q

[plugins.'io.containerd.cri.v1.runtime']
  # Without it every sandbox fails: runc may not lower its own
  # oom_score_adj here ("Permission denied").
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [%[13]q]
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q
    use_internal_loopback = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[10]q
        Root = %[11]q
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(c.dir, "root"), filepath.Join(c.dir, "state"), c.address, c.address+".ttrpc", c.shimDir,
		WorkloadImage, hosts, cniBin, cniConf, c.bins.Runc, filepath.Join(c.dir, "runc"),
		filepath.Join(c.dir, "image-verifiers"), filepath.Join(c.dir, "cdi"))
	path := filepath.Join(c.dir, "config.toml")
	return path, writeFile(path, config)
}

// unitArgs are kubeletunit's flags that make the unit the whole node:
// containerd beside the kubelet in one mount namespace, in the node's
// cgroup, the workload image imported before the kubelet starts.
func (c *containerdNode) unitArgs(configFile, log string) []string {
	return []string{
		"--node-namespace",
		"--cgroup-root=" + c.cgroupRoot,
		"--containerd=" + c.bins.Containerd,
		"--containerd-config=" + configFile,
		"--containerd-address=" + c.address,
		"--containerd-log=" + log,
		"--ctr=" + c.bins.Ctr,
		"--containerd-import=" + c.bins.WorkloadImageArchive,
	}
}

// env is the unit's environment, which containerd inherits: the shim and
// runc on its PATH, and every proxy a dead loopback address, so that no
// registry request leaves the machine even past the hosts configuration.
func (c *containerdNode) env() []string {
	env := []string{"PATH=" + filepath.Dir(c.bins.Shim) + ":" + filepath.Dir(c.bins.Runc) + ":" + os.Getenv("PATH")}
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		switch strings.ToUpper(name) {
		case "PATH", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY":
			continue
		}
		env = append(env, e)
	}
	return append(env, "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=")
}

// localConfig are the kubelet's configuration fields for a node on
// containerd: the node's cgroup root, pods in QoS cgroups under
// kubepods, whose limits the node's allocatable sets.
func (c *containerdNode) localConfig() map[string]any {
	return map[string]any{
		"containerRuntimeEndpoint": "unix://" + c.address,
		"cgroupRoot":               c.cgroupRoot,
		"cgroupsPerQOS":            true,
		"enforceNodeAllocatable":   []string{"pods"},
	}
}

// WorkloadContainer is a container of WorkloadImage running test/workload
// with args (its flags; none makes it a pause container), never pulled.
// One that writes a heartbeat (`--write /data`) mounts WorkloadVolume at
// /data; no other does, so that only a pod whose emptyDir holds something
// has one (a drain keeps such pods unless told it may delete their data).
func WorkloadContainer(name string, args ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: WorkloadImage, ImagePullPolicy: corev1.PullNever, Args: args}
	if slices.Contains(args, "--write") {
		c.VolumeMounts = []corev1.VolumeMount{{Name: WorkloadVolume, MountPath: "/data"}}
	}
	return c
}

// WorkloadVolume is the emptyDir WorkloadPodSpec gives a pod whose
// containers write a heartbeat, at /data (HeartbeatFile).
const WorkloadVolume = "data"

// WorkloadPodSpec is a pod spec for real-container nodes: containers, on
// the host's network (the nodes have no pod network), a short grace
// period, and an emptyDir at /data when a container mounts it.
func WorkloadPodSpec(containers ...corev1.Container) corev1.PodSpec {
	spec := corev1.PodSpec{
		HostNetwork:                   true,
		AutomountServiceAccountToken:  new(false),
		TerminationGracePeriodSeconds: new(int64(2)),
		Containers:                    containers,
	}
	for _, c := range containers {
		if len(c.VolumeMounts) > 0 {
			spec.Volumes = []corev1.Volume{{Name: WorkloadVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			break
		}
	}
	return spec
}

// Heartbeat reads what `workload --write /data` last wrote in pod's
// emptyDir on this node, from the host's side (the kubelet's root
// directory): the writer's PID as the container sees it and its count.
func (n *Node) Heartbeat(pod *corev1.Pod) (pid, count int, err error) {
	root, err := n.KubeletRootDir()
	if err != nil {
		return 0, 0, err
	}
	data, err := os.ReadFile(filepath.Join(root, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", WorkloadVolume, "heartbeat"))
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(string(data), &pid, &count); err != nil {
		return 0, 0, fmt.Errorf("pod %s/%s's heartbeat %q: %w", pod.Namespace, pod.Name, data, err)
	}
	return pid, count, nil
}
