package disruption

import "slices"

// The state files a configuration change can invalidate. They are the only
// names a Plan ever carries, so a caller that deletes what a Plan lists can
// never be steered into deleting anything else, whatever the configurations
// say.
const (
	// cpuManagerState is the CPU manager's checkpoint: the policy that wrote
	// it, the shared CPU pool and the CPUs pinned to each container. The
	// kubelet refuses to start when the configured policy differs from the
	// recorded one, and under the static policy when the reserved CPUs are no
	// longer all in the shared pool (pkg/kubelet/cm/cpumanager).
	cpuManagerState = "cpu_manager_state"
	// memoryManagerState is the memory manager's checkpoint: the policy that
	// wrote it, the memory per NUMA node and each container's blocks. The
	// kubelet refuses to start when the policy differs or, under the Static
	// policy, when the reserved memory per NUMA node no longer gives the
	// recorded machine state (pkg/kubelet/cm/memorymanager).
	memoryManagerState = "memory_manager_state"
)

// The directories state files are in. The root directory is the kubelet's
// --root-dir, /var/lib/kubelet by default.
const (
	rootDir = "the root directory"
	// devicePluginDir is fixed in the kubelet (DevicePluginPath of
	// k8s.io/kubelet/pkg/apis/deviceplugin), whatever its root directory.
	devicePluginDir = "/var/lib/kubelet/device-plugins, whatever the root directory"
)

// StateFile is one of the kubelet's state files, and what nodeguard does
// with it.
type StateFile struct {
	// Name is the file's name.
	Name string
	// Where is the directory the file is in.
	Where string
	// Removable is true for the files a Plan may list: a configuration
	// change can invalidate them and the kubelet refuses to start until they
	// are gone. False for the files nodeguard never removes.
	Removable bool
	// Owner is the part of the kubelet that keeps the file.
	Owner string
	// Why says why the file is removed or kept.
	Why string
}

// stateFiles is every state file the kubelet of the release nodeguard is
// built against keeps beside its pods (not counting the files in each
// pod's own directory), in name order. The removable ones are all directly
// in the root directory, which is what Plan.StateFiles are relative to.
// TestStateFilesAgainstKubeletSource checks it against the kubelet's source,
// so a new file upstream has to be placed here before it can be forgotten.
var stateFiles = []StateFile{
	{
		Name:  "actuated_pods_state",
		Where: rootDir,
		Owner: "container runtime manager (in-place pod resize)",
		Why:   "records the resources the container runtime was last asked to apply to each container (in-place resize); it belongs to pods, not to a configuration field, and without it the kubelet would take running containers for unresized ones",
	},
	{
		Name:  "allocated_pods_state",
		Where: rootDir,
		Owner: "allocation manager (in-place pod resize)",
		Why:   "records the resources the kubelet allocated to each pod; it belongs to pods, not to a configuration field, and removing it would lose accepted resizes of pods that keep running",
	},
	{
		Name:      cpuManagerState,
		Where:     rootDir,
		Removable: true,
		Owner:     "CPU manager",
		Why:       "holds the policy that wrote it and the CPUs pinned to containers; the kubelet refuses to start when the policy, its options or (under the static policy) the reserved CPUs no longer match, and asks for a drain and its removal",
	},
	{
		Name:  "dra_health_state",
		Where: rootDir,
		Owner: "Dynamic Resource Allocation manager",
		Why:   "caches the health DRA drivers reported for their devices; no configuration field shapes it, and the drivers report again anyway",
	},
	{
		Name:  "dra_manager_state",
		Where: rootDir,
		Owner: "Dynamic Resource Allocation manager",
		Why:   "records the ResourceClaims prepared for pods on this node; no configuration field shapes it, and removing it would leave claims prepared in the drivers with nobody to unprepare them",
	},
	{
		Name:  "graceful_node_shutdown_state",
		Where: rootDir,
		Owner: "graceful node shutdown manager",
		Why:   "records when the last node shutdown started and ended, for the node's status; a configuration change does not invalidate it",
	},
	{
		Name:  "kubelet_internal_checkpoint",
		Where: devicePluginDir,
		Owner: "device manager",
		Why:   "records which device-plugin devices are allocated to which containers; no configuration field shapes it, and removing it would let the kubelet hand devices still in use to new pods",
	},
	{
		Name:      memoryManagerState,
		Where:     rootDir,
		Removable: true,
		Owner:     "memory manager",
		Why:       "holds the policy that wrote it and the memory per NUMA node; the kubelet refuses to start when the policy or (under the Static policy) the reserved memory no longer match, and asks for a drain and its removal",
	},
}

// StateFiles lists the state files the kubelet keeps and whether a Plan may ever remove them, for the docs and for
// callers that want to check a Plan against the list.
func StateFiles() []StateFile {
	return slices.Clone(stateFiles)
}

// isRemovable reports whether name is one of the files a Plan may list.
func isRemovable(name string) bool {
	return slices.ContainsFunc(stateFiles, func(f StateFile) bool { return f.Removable && f.Name == name })
}
