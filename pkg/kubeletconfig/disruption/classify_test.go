package disruption

import (
	"slices"
	"strings"
	"testing"
)

// classifyCase is one change and what it must need. from and to are bodies
// of a KubeletConfiguration without apiVersion and kind; "" is no file at
// all (the kubelet's defaults).
type classifyCase struct {
	name     string
	from, to string
	// fields are the fields the Reasons must name, in order; none means
	// a restart.
	fields []string
	files  []string
	// reason, when set, must be one of the Reasons word for word.
	reason string
}

const (
	static    = "cpuManagerPolicy: static\n"
	memStatic = "memoryManagerPolicy: Static\n"
)

var classifyCases = []classifyCase{
	// No change, or only to what the kubelet would default anyway.
	{name: "defaults both sides"},
	{name: "a file with nothing set is the defaults", from: "", to: "# nothing set\n"},
	{name: "explicit defaults", from: "", to: strings.Join([]string{
		"cpuManagerPolicy: none", "memoryManagerPolicy: None", "topologyManagerPolicy: none",
		"topologyManagerScope: container", "maxPods: 110", "podsPerCore: 0", "cgroupDriver: cgroupfs",
		"cgroupRoot: /", "cgroupsPerQOS: true", "localStorageCapacityIsolation: true",
		"userNamespaces: {idsPerPod: 65536}", "enforceNodeAllocatable: [pods]", "mergeDefaultEvictionSettings: false",
		"cpuManagerPolicyOptions: {}", "topologyManagerPolicyOptions: {}", "kubeReserved: {}", "reservedMemory: []",
		"evictionHard: {memory.available: 100Mi, nodefs.available: 10%, nodefs.inodesFree: 5%, imagefs.available: 15%, imagefs.inodesFree: 5%}",
		"featureGates: {}", "allowedUnsafeSysctls: []",
	}, "\n") + "\n"},
	{name: "none to none", from: "cpuManagerPolicy: none\n", to: "cpuManagerPolicy: none\n"},
	{name: "merged defaults equal the defaults", from: "", to: "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 100Mi}\n"},

	// Restart fields.
	{name: "restart fields only", from: "port: 10250\nsyncFrequency: 1m\nstaticPodPath: /a\nkubeletCgroups: /k\nsystemCgroups: /s\ncpuManagerReconcilePeriod: 10s\nevictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\n",
		to: "port: 10251\nsyncFrequency: 2m\nstaticPodPath: /b\nkubeletCgroups: /k2\nsystemCgroups: /s2\ncpuManagerReconcilePeriod: 5s\nevictionSoft: {memory.available: 2Gi}\nevictionSoftGracePeriod: {memory.available: 2m}\n"},

	// CPU manager.
	{name: "cpu policy none to static", from: "cpuManagerPolicy: none\n", to: static,
		fields: []string{"cpuManagerPolicy"}, files: []string{cpuManagerState},
		reason: `cpuManagerPolicy: "none" -> "static" (removes cpu_manager_state)`},
	{name: "cpu policy static to none", from: static, to: "",
		fields: []string{"cpuManagerPolicy"}, files: []string{cpuManagerState},
		reason: `cpuManagerPolicy: "static" -> "none" (removes cpu_manager_state)`},
	{name: "cpu policy options", from: static, to: static + "cpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n",
		fields: []string{"cpuManagerPolicyOptions"}, files: []string{cpuManagerState},
		reason: `cpuManagerPolicyOptions: {} -> {"full-pcpus-only":"true"} (removes cpu_manager_state)`},
	{name: "reserved CPUs under static", from: static + "reservedSystemCPUs: 0-1\n", to: static + "reservedSystemCPUs: 0-3\n",
		fields: []string{"reservedSystemCPUs"}, files: []string{cpuManagerState}},
	{name: "reserved CPUs respelled", from: static + "reservedSystemCPUs: 0,1\n", to: static + "reservedSystemCPUs: 0-1\n"},
	{name: "reserved CPUs moved under none", from: "reservedSystemCPUs: 0-1\n", to: "reservedSystemCPUs: 2-3\n"},
	{name: "more reserved CPUs under none", from: "reservedSystemCPUs: 0-1\n", to: "reservedSystemCPUs: 0-3\n",
		fields: []string{"reservedSystemCPUs"}},
	{name: "kube-reserved cpu grows under static", from: static + "kubeReserved: {cpu: \"1\"}\n", to: static + "kubeReserved: {cpu: \"2\"}\n",
		fields: []string{"kubeReserved"}, files: []string{cpuManagerState}},
	{name: "system-reserved cpu shrinks under static", from: static + "systemReserved: {cpu: \"2\"}\n", to: static + "systemReserved: {cpu: \"1\"}\n",
		fields: []string{"systemReserved"}, files: []string{cpuManagerState}},
	{name: "cpu reservation grows within one CPU under static", from: static + "kubeReserved: {cpu: 500m}\n", to: static + "kubeReserved: {cpu: 900m}\n",
		fields: []string{"kubeReserved"}},
	{name: "cpu reservation moved under static", from: static + "kubeReserved: {cpu: \"1\"}\n", to: static + "systemReserved: {cpu: \"1\"}\n"},
	{name: "cpu reservation overridden by reserved CPUs", from: static + "reservedSystemCPUs: 0-1\nkubeReserved: {cpu: \"1\"}\n", to: static + "reservedSystemCPUs: 0-1\nkubeReserved: {cpu: \"2\"}\n"},
	{name: "kube-reserved cpu shrinks under none", from: "kubeReserved: {cpu: \"2\"}\n", to: "kubeReserved: {cpu: \"1\"}\n"},

	// Memory manager.
	{name: "memory policy None to Static", from: "", to: memStatic,
		fields: []string{"memoryManagerPolicy"}, files: []string{memoryManagerState},
		reason: `memoryManagerPolicy: "None" -> "Static" (removes memory_manager_state)`},
	{name: "memory policy Static to None", from: memStatic, to: "memoryManagerPolicy: None\n",
		fields: []string{"memoryManagerPolicy"}, files: []string{memoryManagerState}},
	{name: "reserved memory under Static", from: memStatic + "reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]\n", to: memStatic + "reservedMemory: [{numaNode: 0, limits: {memory: 2Gi}}]\n",
		fields: []string{"reservedMemory"}, files: []string{memoryManagerState}},
	{name: "reserved memory respelled under Static",
		from: memStatic + "reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}, {numaNode: 1, limits: {memory: 1Gi}}]\n",
		to:   memStatic + "reservedMemory: [{numaNode: 1, limits: {memory: 1024Mi}}, {numaNode: 0, limits: {memory: 1Gi}}]\n"},
	{name: "reserved memory under None", from: "reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]\n", to: "reservedMemory: [{numaNode: 0, limits: {memory: 2Gi}}]\n"},
	{name: "both managers", from: "", to: static + memStatic,
		fields: []string{"cpuManagerPolicy", "memoryManagerPolicy"}, files: []string{cpuManagerState, memoryManagerState}},

	// Topology manager.
	{name: "topology policy", from: "", to: "topologyManagerPolicy: single-numa-node\n",
		fields: []string{"topologyManagerPolicy"}},
	{name: "topology policy back to none", from: "topologyManagerPolicy: restricted\n", to: "topologyManagerPolicy: none\n",
		fields: []string{"topologyManagerPolicy"}},
	{name: "topology scope", from: "topologyManagerPolicy: restricted\n", to: "topologyManagerPolicy: restricted\ntopologyManagerScope: pod\n",
		fields: []string{"topologyManagerScope"}},
	{name: "topology scope under none", from: "", to: "topologyManagerScope: pod\n"},
	{name: "topology options", from: "topologyManagerPolicy: best-effort\n", to: "topologyManagerPolicy: best-effort\ntopologyManagerPolicyOptions: {prefer-closest-numa-nodes: \"true\"}\n",
		fields: []string{"topologyManagerPolicyOptions"}},

	// Pod capacity.
	{name: "maxPods shrinks", from: "maxPods: 110\n", to: "maxPods: 20\n",
		fields: []string{"maxPods"}, reason: "maxPods: 110 -> 20 shrinks what the node holds"},
	{name: "maxPods shrinks from the default", from: "", to: "maxPods: 20\n",
		fields: []string{"maxPods"}, reason: "maxPods: 110 -> 20 shrinks what the node holds"},
	{name: "maxPods grows", from: "maxPods: 110\n", to: "maxPods: 250\n"},
	{name: "podsPerCore from unlimited", from: "", to: "podsPerCore: 10\n", fields: []string{"podsPerCore"}},
	{name: "podsPerCore shrinks", from: "podsPerCore: 10\n", to: "podsPerCore: 5\n", fields: []string{"podsPerCore"}},
	{name: "podsPerCore grows", from: "podsPerCore: 5\n", to: "podsPerCore: 10\n"},
	{name: "podsPerCore to unlimited", from: "podsPerCore: 10\n", to: "podsPerCore: 0\n"},

	// Reservations.
	{name: "kube-reserved memory grows", from: "kubeReserved: {memory: 1Gi}\n", to: "kubeReserved: {memory: 2Gi}\n",
		fields: []string{"kubeReserved"}, reason: "kubeReserved: memory 1Gi -> 2Gi shrinks what the node holds"},
	{name: "kube-reserved dropped", from: "kubeReserved: {memory: 1Gi, cpu: 500m}\n", to: ""},
	{name: "kube-reserved respelled", from: "kubeReserved: {memory: 1Gi}\n", to: "kubeReserved: {memory: 1024Mi}\n"},
	{name: "system-reserved storage added", from: "", to: "systemReserved: {ephemeral-storage: 10Gi}\n", fields: []string{"systemReserved"}},
	{name: "reservation moved between maps", from: "kubeReserved: {memory: 1Gi}\n", to: "systemReserved: {memory: 1Gi}\n"},
	{name: "reservation that does not parse", from: "kubeReserved: {memory: 1Gi}\n", to: "kubeReserved: {memory: lots}\n", fields: []string{"kubeReserved"}},

	// Hard eviction.
	{name: "memory threshold grows", from: "", to: "evictionHard: {memory.available: 500Mi, nodefs.available: 10%}\n",
		fields: []string{"evictionHard"}, reason: "evictionHard: memory.available 100Mi -> 500Mi shrinks what the node holds"},
	{name: "memory threshold shrinks", from: "evictionHard: {memory.available: 500Mi}\n", to: "evictionHard: {memory.available: 100Mi}\n"},
	{name: "imagefs threshold grows", from: "", to: "evictionHard: {memory.available: 100Mi, nodefs.available: 10%, imagefs.available: 30%}\n"},
	{name: "percentage to quantity", from: "evictionHard: {nodefs.available: 10%}\n", to: "evictionHard: {nodefs.available: 1Gi}\n", fields: []string{"evictionHard"}},
	{name: "quantity to percentage", from: "evictionHard: {memory.available: 100Mi}\n", to: "evictionHard: {memory.available: 1%}\n", fields: []string{"evictionHard"}},
	{name: "percentage grows", from: "evictionHard: {nodefs.available: 10%}\n", to: "evictionHard: {nodefs.available: 15%}\n", fields: []string{"evictionHard"}},
	{name: "threshold turned off", from: "evictionHard: {nodefs.available: 10%}\n", to: "evictionHard: {nodefs.available: 0%}\n"},
	{name: "threshold turned on", from: "evictionHard: {nodefs.available: 100%}\n", to: "evictionHard: {nodefs.available: 5%}\n", fields: []string{"evictionHard"}},
	{name: "empty thresholds back to the defaults", from: "evictionHard: {}\n", to: "", fields: []string{"evictionHard"}},
	{name: "defaults merged in", from: "evictionHard: {memory.available: 100Mi}\n", to: "evictionHard: {memory.available: 100Mi}\nmergeDefaultEvictionSettings: true\n",
		fields: []string{"mergeDefaultEvictionSettings"}},

	// Cgroups.
	{name: "cgroup driver", from: "", to: "cgroupDriver: systemd\n", fields: []string{"cgroupDriver"}},
	{name: "cgroup root", from: "cgroupRoot: /\n", to: "cgroupRoot: /pods\n", fields: []string{"cgroupRoot"}},
	{name: "cgroups per QoS", from: "", to: "cgroupsPerQOS: false\n", fields: []string{"cgroupsPerQOS"}},
	{name: "pods enforcement on", from: "enforceNodeAllocatable: [none]\n", to: "enforceNodeAllocatable: [pods]\n", fields: []string{"enforceNodeAllocatable"}},
	{name: "pods enforcement back to the default", from: "enforceNodeAllocatable: []\n", to: "", fields: []string{"enforceNodeAllocatable"}},
	{name: "system enforcement added", from: "", to: "enforceNodeAllocatable: [pods, system-reserved]\nsystemReservedCgroup: /system.slice\n"},
	{name: "pods enforcement off", from: "", to: "enforceNodeAllocatable: []\n"},

	// What running pods rely on.
	{name: "local storage isolation off", from: "", to: "localStorageCapacityIsolation: false\n", fields: []string{"localStorageCapacityIsolation"}},
	{name: "local storage isolation on", from: "localStorageCapacityIsolation: false\n", to: ""},
	{name: "user namespace length", from: "", to: "userNamespaces: {idsPerPod: 131072}\n", fields: []string{"userNamespaces"}},
	{name: "sysctl removed", from: "allowedUnsafeSysctls: [net.core.somaxconn, kernel.msgmax]\n", to: "allowedUnsafeSysctls: [kernel.msgmax]\n", fields: []string{"allowedUnsafeSysctls"}},
	{name: "sysctl covered by a wildcard", from: "allowedUnsafeSysctls: [net.core.somaxconn]\n", to: "allowedUnsafeSysctls: [net.core.*]\n"},
	{name: "sysctl added", from: "", to: "allowedUnsafeSysctls: [kernel.msg*]\n"},
	{name: "gate turned off", from: "featureGates: {Foo: true}\n", to: "featureGates: {Foo: false}\n", fields: []string{"featureGates"}},
	{name: "gate set off", from: "", to: "featureGates: {Foo: false}\n", fields: []string{"featureGates"}},
	{name: "gate left to its default", from: "featureGates: {Foo: true}\n", to: ""},
	{name: "gate turned on", from: "featureGates: {Foo: false}\n", to: "featureGates: {Foo: true}\n"},
	{name: "gate stays off", from: "featureGates: {Foo: false}\n", to: "featureGates: {Foo: false, Bar: true}\n"},
}

func TestClassifyFiles(t *testing.T) {
	for _, tc := range classifyCases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := ClassifyFiles(file(tc.from), file(tc.to))
			if err != nil {
				t.Fatalf("ClassifyFiles() error: %v", err)
			}
			checkPlan(t, plan, tc)
		})
	}
}

// file makes a configuration file of a body; "" is no file.
func file(body string) []byte {
	if body == "" {
		return nil
	}
	return []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + body)
}

func checkPlan(t *testing.T, plan Plan, tc classifyCase) {
	t.Helper()
	if got := reasonFields(plan.Reasons); !slices.Equal(got, tc.fields) {
		t.Errorf("Reasons name %q, want %q; Reasons: %q", got, tc.fields, plan.Reasons)
	}
	if plan.Drain != (len(tc.fields) > 0) {
		t.Errorf("Drain = %v, want %v; Reasons: %q", plan.Drain, len(tc.fields) > 0, plan.Reasons)
	}
	if !slices.Equal(plan.StateFiles, tc.files) {
		t.Errorf("StateFiles = %q, want %q", plan.StateFiles, tc.files)
	}
	if tc.reason != "" && !slices.Contains(plan.Reasons, tc.reason) {
		t.Errorf("Reasons = %q, want one to be %q", plan.Reasons, tc.reason)
	}
}

// reasonFields is the field each reason is about.
func reasonFields(reasons []string) []string {
	var fields []string
	for _, reason := range reasons {
		field, _, _ := strings.Cut(reason, ":")
		fields = append(fields, field)
	}
	return fields
}

func TestClassifyFilesDecoding(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		wantErr  string
		fields   []string
	}{
		{name: "nil and whitespace are defaults", from: "", to: " \n\t\n"},
		{name: "JSON", from: "", to: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":20}`, fields: []string{"maxPods"}},
		{name: "unknown field ignored", from: "", to: string(file("maxPods: 20\nnotAField: 1\n")), fields: []string{"maxPods"}},
		{name: "duplicate field tolerated", from: "", to: string(file("maxPods: 30\nmaxPods: 20\n")), fields: []string{"maxPods"}},
		{name: "another kind", from: "apiVersion: v1\nkind: ConfigMap\n", to: "", wantErr: "the old configuration"},
		{name: "another version", from: "", to: "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", wantErr: "the new configuration"},
		{name: "no kind", from: "", to: "apiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 20\n", wantErr: "kind is missing"},
		{name: "no type at all", from: "", to: "maxPods: 20\n", wantErr: "the new configuration"},
		{name: "not YAML", from: "", to: "{maxPods: [", wantErr: "the new configuration"},
		{name: "wrong type", from: "", to: string(file("maxPods: many\n")), wantErr: "the new configuration"},
		{name: "another kubelet type", from: "", to: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: SerializedNodeConfigSource\n", wantErr: "the new configuration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := ClassifyFiles([]byte(tc.from), []byte(tc.to))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ClassifyFiles() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClassifyFiles() error: %v", err)
			}
			if got := reasonFields(plan.Reasons); !slices.Equal(got, tc.fields) {
				t.Errorf("Reasons name %q, want %q", got, tc.fields)
			}
		})
	}
}
