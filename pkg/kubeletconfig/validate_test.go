package kubeletconfig

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// decodeBody decodes a YAML body under the KubeletConfiguration header.
func decodeBody(tb testing.TB, body string) *kubeletconfigv1beta1.KubeletConfiguration {
	tb.Helper()
	cfg, err := Decode([]byte(header + body))
	if err != nil {
		tb.Fatalf("Decode() error = %v", err)
	}
	return cfg
}

// errorKeys renders errors as "path: type", the part of a field.Error that
// tests pin down; the detail text is free to improve.
func errorKeys(errs field.ErrorList) []string {
	keys := make([]string, 0, len(errs))
	for _, err := range errs {
		keys = append(keys, err.Field+": "+err.Type.String())
	}
	slices.Sort(keys)
	return keys
}

func TestValidateAcceptsValidConfigs(t *testing.T) {
	tests := map[string]string{
		"empty":                                                           "",
		"zero ports mean default or disabled":                             "port: 0\nreadOnlyPort: 0\nhealthzPort: 0\n",
		"percent thresholds at the bounds":                                "evictionHard:\n  memory.available: 0%\n  nodefs.available: 100%\n  imagefs.available: 12.5%\n",
		"soft threshold with grace period":                                "evictionSoft:\n  pid.available: 10%\nevictionSoftGracePeriod:\n  pid.available: 30s\n",
		"minimum reclaim of zero":                                         "evictionMinimumReclaim:\n  memory.available: \"0\"\n",
		"enforcement none without cgroupsPerQOS":                          "cgroupsPerQOS: false\nenforceNodeAllocatable: [none]\n",
		"empty enforcement list without cgroupsPerQOS":                    "cgroupsPerQOS: false\nenforceNodeAllocatable: []\n",
		"default image GC thresholds with low set below":                  "imageGCLowThresholdPercent: 60\n",
		"image max age over default min":                                  "imageMaximumGCAge: 3m\n",
		"parallel pulls without serializeImagePulls":                      "maxParallelImagePulls: 10\n",
		"serialized pulls of one":                                         "serializeImagePulls: true\nmaxParallelImagePulls: 1\n",
		"unlimited pids":                                                  "podPidsLimit: -1\n",
		"resolvConf disabled":                                             "resolvConf: \"\"\n",
		"negative container log size disables rotation":                   "containerLogMaxSize: \"-1\"\n",
		"static CPU policy with reserved CPUs":                            "cpuManagerPolicy: static\nreservedSystemCPUs: 0-1\n",
		"static CPU policy with kube reserved":                            "cpuManagerPolicy: static\nkubeReserved:\n  cpu: 100m\n",
		"static memory policy with percentage eviction cannot be checked": "memoryManagerPolicy: Static\nevictionHard:\n  memory.available: 5%\n",
		"static memory policy with only the default eviction reservation": "memoryManagerPolicy: Static\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 100Mi\n",
		"static memory policy split over nodes":                           "memoryManagerPolicy: Static\nevictionHard:\n  memory.available: 100Mi\nsystemReserved:\n  memory: 1Gi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 562Mi\n- numaNode: 1\n  limits:\n    memory: 562Mi\n    hugepages-2Mi: 4Mi\n",
		"static memory policy with merged defaults":                       "memoryManagerPolicy: Static\nmergeDefaultEvictionSettings: true\nevictionHard:\n  nodefs.available: 5%\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 100Mi\n",
		"static memory policy without eviction reservation":               "memoryManagerPolicy: Static\nevictionHard:\n  nodefs.available: 5%\n",
		"shutdown periods":                                                "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n",
		"shutdown by priority":                                            "shutdownGracePeriodByPodPriority:\n- priority: 0\n  shutdownGracePeriodSeconds: 30\n",
		"taint without effect":                                            "registerWithTaints:\n- key: example.com/a\n",
		"sysctls in both spellings of different names":                    "defaultPodSysctls:\n  net.ipv4.ip_forward: \"1\"\n  net/core/somaxconn: \"1024\"\n",
		"json logging":                                                    "logging:\n  format: json\n",
		"tracing":                                                         "tracing:\n  endpoint: localhost:4317\n  samplingRatePerMillion: 100\n",
		"user namespaces":                                                 "userNamespaces:\n  idsPerPod: 131072\n",
		"IPv6 address and DNS":                                            "address: \"::\"\nclusterDNS: [\"fd00::a\"]\n",
		"memory throttling factor of one":                                 "memoryThrottlingFactor: 1.0\n",
		"qos reserved":                                                    "qosReserved:\n  memory: 50%\n",
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			if errs := Validate(decodeBody(t, body)); len(errs) > 0 {
				t.Errorf("Validate() = %v, want no errors", errs)
			}
		})
	}
	t.Run("production config", func(t *testing.T) {
		if errs := Validate(loadTestConfig(t, "kubelet-4k.yaml")); len(errs) > 0 {
			t.Errorf("Validate() = %v, want no errors", errs)
		}
	})
}

func TestValidateRefusesInvalidFields(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		// Eviction.
		{"misspelt hard signal", "evictionHard:\n  memory.avilable: 100Mi\n", []string{"evictionHard[memory.avilable]: Unsupported value"}},
		{"hard quantity syntax", "evictionHard:\n  memory.available: 100MB\n", []string{"evictionHard[memory.available]: Invalid value"}},
		{"hard zero quantity", "evictionHard:\n  memory.available: \"0\"\n", []string{"evictionHard[memory.available]: Invalid value"}},
		{"hard negative quantity", "evictionHard:\n  memory.available: -1Gi\n", []string{"evictionHard[memory.available]: Invalid value"}},
		{"hard percentage over 100", "evictionHard:\n  nodefs.available: 101%\n", []string{"evictionHard[nodefs.available]: Invalid value"}},
		{"hard negative percentage", "evictionHard:\n  nodefs.available: -1%\n", []string{"evictionHard[nodefs.available]: Invalid value"}},
		{"hard percentage syntax", "evictionHard:\n  nodefs.available: ten%\n", []string{"evictionHard[nodefs.available]: Invalid value"}},
		{"NaN percentage", "evictionHard:\n  nodefs.available: NaN%\n", []string{"evictionHard[nodefs.available]: Invalid value"}},
		{"soft without grace period", "evictionSoft:\n  memory.available: 1Gi\n", []string{"evictionSoftGracePeriod[memory.available]: Required value"}},
		{"soft with grace period of another signal", "evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  nodefs.available: 1m\n", []string{"evictionSoftGracePeriod[memory.available]: Required value"}},
		{"soft unknown signal", "evictionSoft:\n  memory: 1Gi\n", []string{"evictionSoft[memory]: Unsupported value"}},
		{"grace period syntax", "evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: \"90\"\n", []string{"evictionSoftGracePeriod[memory.available]: Invalid value"}},
		{"negative grace period", "evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: -1m\n", []string{"evictionSoftGracePeriod[memory.available]: Invalid value"}},
		{"grace period unknown signal", "evictionSoftGracePeriod:\n  disk: 1m\n", []string{"evictionSoftGracePeriod[disk]: Unsupported value"}},
		{"minimum reclaim zero percent", "evictionMinimumReclaim:\n  nodefs.available: 0%\n", []string{"evictionMinimumReclaim[nodefs.available]: Invalid value"}},
		{"minimum reclaim negative", "evictionMinimumReclaim:\n  memory.available: -1Mi\n", []string{"evictionMinimumReclaim[memory.available]: Invalid value"}},
		{"minimum reclaim unknown signal", "evictionMinimumReclaim:\n  nodefs: 1Gi\n", []string{"evictionMinimumReclaim[nodefs]: Unsupported value"}},
		{"negative pressure transition", "evictionPressureTransitionPeriod: -1s\n", []string{"evictionPressureTransitionPeriod: Invalid value"}},

		// Rate limits.
		{"negative kubeAPIQPS", "kubeAPIQPS: -1\n", []string{"kubeAPIQPS: Invalid value"}},
		{"negative kubeAPIBurst", "kubeAPIBurst: -1\n", []string{"kubeAPIBurst: Invalid value"}},
		{"negative eventRecordQPS", "eventRecordQPS: -5\n", []string{"eventRecordQPS: Invalid value"}},
		{"negative eventBurst", "eventBurst: -5\n", []string{"eventBurst: Invalid value"}},
		{"negative registryPullQPS", "registryPullQPS: -1\n", []string{"registryPullQPS: Invalid value"}},
		{"negative registryBurst", "registryBurst: -1\n", []string{"registryBurst: Invalid value"}},

		// Serving.
		{"port too large", "port: 70000\n", []string{"port: Invalid value"}},
		{"negative port", "port: -1\n", []string{"port: Invalid value"}},
		{"readOnlyPort too large", "readOnlyPort: 65536\n", []string{"readOnlyPort: Invalid value"}},
		{"healthzPort negative", "healthzPort: -10\n", []string{"healthzPort: Invalid value"}},
		{"address not an IP", "address: kubelet.local\n", []string{"address: Invalid value"}},
		{"TLS version", "tlsMinVersion: TLS12\n", []string{"tlsMinVersion: Unsupported value"}},
		{"TLS cipher", "tlsCipherSuites: [TLS_AES_128_GCM_SHA256, TLS_FAST]\n", []string{"tlsCipherSuites[1]: Invalid value"}},
		{"authorization mode", "authorization:\n  mode: RBAC\n", []string{"authorization.mode: Unsupported value"}},

		// Node status.
		{"negative status update frequency", "nodeStatusUpdateFrequency: -10s\n", []string{"nodeStatusUpdateFrequency: Invalid value"}},
		{"negative status report frequency", "nodeStatusReportFrequency: -1m\n", []string{"nodeStatusReportFrequency: Invalid value"}},
		{"negative lease duration", "nodeLeaseDurationSeconds: -40\n", []string{"nodeLeaseDurationSeconds: Invalid value"}},
		{"status max images", "nodeStatusMaxImages: -2\n", []string{"nodeStatusMaxImages: Invalid value"}},

		// Images.
		{"GC high over 100", "imageGCHighThresholdPercent: 101\n", []string{"imageGCHighThresholdPercent: Invalid value"}},
		{"GC low negative", "imageGCLowThresholdPercent: -1\n", []string{"imageGCLowThresholdPercent: Invalid value"}},
		{"GC low equal to high", "imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 70\n", []string{"imageGCLowThresholdPercent: Invalid value"}},
		{"GC low above default high", "imageGCLowThresholdPercent: 90\n", []string{"imageGCLowThresholdPercent: Invalid value"}},
		{"GC high below default low", "imageGCHighThresholdPercent: 50\n", []string{"imageGCLowThresholdPercent: Invalid value"}},
		{"negative min GC age", "imageMinimumGCAge: -1m\n", []string{"imageMinimumGCAge: Invalid value"}},
		{"negative max GC age", "imageMaximumGCAge: -1m\n", []string{"imageMaximumGCAge: Invalid value"}},
		{"max GC age not over min", "imageMinimumGCAge: 10m\nimageMaximumGCAge: 10m\n", []string{"imageMaximumGCAge: Invalid value"}},
		{"max GC age not over default min", "imageMaximumGCAge: 1m\n", []string{"imageMaximumGCAge: Invalid value"}},
		{"parallel pulls zero", "maxParallelImagePulls: 0\n", []string{"maxParallelImagePulls: Invalid value"}},
		{"parallel pulls while serialized", "serializeImagePulls: true\nmaxParallelImagePulls: 4\n", []string{"maxParallelImagePulls: Invalid value"}},
		{"credential verification policy", "imagePullCredentialsVerificationPolicy: Sometimes\n", []string{"imagePullCredentialsVerificationPolicy: Unsupported value"}},
		{"allowlist with another policy", "imagePullCredentialsVerificationPolicy: AlwaysVerify\npreloadedImagesVerificationAllowlist: [registry.k8s.io/pause]\n", []string{"preloadedImagesVerificationAllowlist: Forbidden"}},

		// Pods.
		{"negative maxPods", "maxPods: -1\n", []string{"maxPods: Invalid value"}},
		{"negative podsPerCore", "podsPerCore: -2\n", []string{"podsPerCore: Invalid value"}},
		{"negative maxOpenFiles", "maxOpenFiles: -2\n", []string{"maxOpenFiles: Invalid value"}},
		{"podPidsLimit below -1", "podPidsLimit: -2\n", []string{"podPidsLimit: Invalid value"}},
		{"oomScoreAdj", "oomScoreAdj: -1001\n", []string{"oomScoreAdj: Invalid value"}},
		{"relative resolvConf", "resolvConf: etc/resolv.conf\n", []string{"resolvConf: Invalid value"}},
		{"clusterDNS not an IP", "clusterDNS: [10.96.0.10, kube-dns]\n", []string{"clusterDNS[1]: Invalid value"}},
		{"relative podLogsDir", "podLogsDir: var/log/pods\n", []string{"podLogsDir: Invalid value"}},
		{"unclean podLogsDir", "podLogsDir: /var/log/../log/pods/\n", []string{"podLogsDir: Invalid value"}},
		{"non-ASCII podLogsDir", "podLogsDir: /var/log/pöds\n", []string{"podLogsDir: Invalid value"}},
		{"taint", "registerWithTaints:\n- key: -bad-\n  value: \"a b\"\n  effect: NoRun\n- key: ok\n  timeAdded: \"2024-01-01T00:00:00Z\"\n", []string{
			"registerWithTaints[0].effect: Unsupported value", "registerWithTaints[0].key: Invalid value",
			"registerWithTaints[0].value: Invalid value", "registerWithTaints[1].timeAdded: Forbidden",
		}},
		{"sysctl name", "defaultPodSysctls:\n  Net.IPv4: \"1\"\n", []string{"defaultPodSysctls[Net.IPv4]: Invalid value"}},
		{"sysctl twice in two spellings", "defaultPodSysctls:\n  net.ipv4.ip_forward: \"1\"\n  net/ipv4/ip_forward: \"0\"\n", []string{"defaultPodSysctls[net/ipv4/ip_forward]: Duplicate value"}},

		// Container logs.
		{"log size syntax", "containerLogMaxSize: 10MB\n", []string{"containerLogMaxSize: Invalid value"}},
		{"log size fraction", "containerLogMaxSize: \"0.5\"\n", []string{"containerLogMaxSize: Invalid value"}},
		{"log files", "containerLogMaxFiles: 1\n", []string{"containerLogMaxFiles: Invalid value"}},
		{"log workers", "containerLogMaxWorkers: 0\n", []string{"containerLogMaxWorkers: Invalid value"}},
		{"log monitor interval", "containerLogMonitorInterval: 1s\n", []string{"containerLogMonitorInterval: Invalid value"}},

		// Shutdown.
		{"critical longer than total", "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", []string{"shutdownGracePeriodCriticalPods: Invalid value"}},
		{"sub-second shutdown", "shutdownGracePeriod: 500ms\n", []string{"shutdownGracePeriod: Invalid value"}},
		{"negative shutdown", "shutdownGracePeriod: -1s\nshutdownGracePeriodCriticalPods: -2s\n", []string{"shutdownGracePeriod: Invalid value", "shutdownGracePeriodCriticalPods: Invalid value"}},
		{"shutdown by priority with period", "shutdownGracePeriod: 30s\nshutdownGracePeriodByPodPriority:\n- priority: 0\n  shutdownGracePeriodSeconds: 30\n", []string{"shutdownGracePeriodByPodPriority: Forbidden"}},

		// Cgroups and node allocatable.
		{"cgroup driver", "cgroupDriver: cgroupsfs\n", []string{"cgroupDriver: Unsupported value"}},
		{"systemCgroups without cgroupRoot", "systemCgroups: /system\n", []string{"cgroupRoot: Required value"}},
		{"swap behaviour", "memorySwap:\n  swapBehavior: UnlimitedSwap\n", []string{"memorySwap.swapBehavior: Unsupported value"}},
		{"enforcement value", "enforceNodeAllocatable: [pods, system]\n", []string{"enforceNodeAllocatable[1]: Unsupported value"}},
		{"enforcement duplicate", "enforceNodeAllocatable: [pods, pods]\n", []string{"enforceNodeAllocatable[1]: Duplicate value"}},
		{"enforcement none with others", "enforceNodeAllocatable: [none, pods]\n", []string{"enforceNodeAllocatable[0]: Invalid value"}},
		{"enforcement exclusive pair", "systemReservedCgroup: /system.slice\nenforceNodeAllocatable: [system-reserved, system-reserved-compressible]\n", []string{"enforceNodeAllocatable: Invalid value"}},
		{"enforcement needs cgroup", "enforceNodeAllocatable: [pods, kube-reserved]\n", []string{"kubeReservedCgroup: Required value"}},
		{"default enforcement needs cgroupsPerQOS", "cgroupsPerQOS: false\n", []string{"cgroupsPerQOS: Invalid value"}},
		{"qosReserved resource", "qosReserved:\n  cpu: 50%\n", []string{"qosReserved[cpu]: Unsupported value"}},
		{"qosReserved percentage", "qosReserved:\n  memory: \"50\"\n", []string{"qosReserved[memory]: Invalid value"}},

		// Reservations.
		{"reserved resource name", "systemReserved:\n  gpu: \"1\"\n", []string{"systemReserved[gpu]: Unsupported value"}},
		{"reserved quantity syntax", "kubeReserved:\n  memory: 1GB\n", []string{"kubeReserved[memory]: Invalid value"}},
		{"reserved negative", "kubeReserved:\n  cpu: -100m\n", []string{"kubeReserved[cpu]: Invalid value"}},
		{"reserved CPUs syntax", "reservedSystemCPUs: 0-a\n", []string{"reservedSystemCPUs: Invalid value"}},
		{"reserved CPUs with cgroup", "reservedSystemCPUs: \"0\"\nkubeReservedCgroup: /kube\n", []string{"reservedSystemCPUs: Forbidden"}},
		{"reserved memory resource", "reservedMemory:\n- numaNode: 0\n  limits:\n    cpu: \"1\"\n", []string{"reservedMemory[0].limits[cpu]: Unsupported value"}},
		{"reserved memory zero", "reservedMemory:\n- numaNode: 0\n  limits:\n    memory: \"0\"\n", []string{"reservedMemory[0].limits[memory]: Invalid value"}},
		{"reserved memory duplicate", "reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\n- numaNode: 0\n  limits:\n    memory: 1Gi\n", []string{"reservedMemory[1].limits[memory]: Duplicate value"}},

		// Resource managers.
		{"CPU policy", "cpuManagerPolicy: Static\n", []string{"cpuManagerPolicy: Unsupported value"}},
		{"static CPU policy without reservation", "cpuManagerPolicy: static\n", []string{"cpuManagerPolicy: Invalid value"}},
		{"static CPU policy with zero reservation", "cpuManagerPolicy: static\nsystemReserved:\n  cpu: \"0\"\n", []string{"cpuManagerPolicy: Invalid value"}},
		{"negative CPU reconcile period", "cpuManagerReconcilePeriod: -10s\n", []string{"cpuManagerReconcilePeriod: Invalid value"}},
		{"memory policy", "memoryManagerPolicy: static\n", []string{"memoryManagerPolicy: Unsupported value"}},
		{"static memory policy without reservation", "memoryManagerPolicy: Static\n", []string{"reservedMemory: Invalid value"}},
		{"static memory policy with a short reservation", "memoryManagerPolicy: Static\nkubeReserved:\n  memory: 1Gi\nreservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\n", []string{"reservedMemory: Invalid value"}},
		{"topology policy", "topologyManagerPolicy: single-numa\n", []string{"topologyManagerPolicy: Unsupported value"}},
		{"topology scope", "topologyManagerScope: node\n", []string{"topologyManagerScope: Unsupported value"}},

		// The rest.
		{"runOnce", "runOnce: true\n", []string{"runOnce: Forbidden"}},
		{"iptables bit", "iptablesMasqueradeBit: 32\niptablesDropBit: -1\n", []string{"iptablesDropBit: Invalid value", "iptablesMasqueradeBit: Invalid value"}},
		{"CFS quota period", "cpuCFSQuotaPeriod: 2s\n", []string{"cpuCFSQuotaPeriod: Invalid value"}},
		{"crash loop max", "crashLoopBackOff:\n  maxContainerRestartPeriod: 10m\n", []string{"crashLoopBackOff.maxContainerRestartPeriod: Invalid value"}},
		{"memory throttling factor", "memoryThrottlingFactor: 1.5\n", []string{"memoryThrottlingFactor: Invalid value"}},
		{"memory throttling factor zero", "memoryThrottlingFactor: 0\n", []string{"memoryThrottlingFactor: Invalid value"}},
		{"memory reservation policy", "memoryReservationPolicy: Tiered\n", []string{"memoryReservationPolicy: Unsupported value"}},
		{"change detection strategy", "configMapAndSecretChangeDetectionStrategy: Poll\n", []string{"configMapAndSecretChangeDetectionStrategy: Unsupported value"}},
		{"log query without handler", "enableSystemLogQuery: true\nenableSystemLogHandler: false\n", []string{"enableSystemLogHandler: Invalid value"}},
		{"user namespaces too small", "userNamespaces:\n  idsPerPod: 1000\n", []string{"userNamespaces.idsPerPod: Invalid value"}},
		{"user namespaces not a multiple", "userNamespaces:\n  idsPerPod: 100000\n", []string{"userNamespaces.idsPerPod: Invalid value"}},
		{"user namespaces too large", "userNamespaces:\n  idsPerPod: 4295032832\n", []string{"userNamespaces.idsPerPod: Invalid value"}},
		{"log format", "logging:\n  format: logfmt\n", []string{"logging.format: Unsupported value"}},
		{"log flush frequency", "logging:\n  flushFrequency: -1s\n", []string{"logging.flushFrequency: Invalid value"}},
		{"log verbosity", "logging:\n  verbosity: 4294967295\n", []string{"logging.verbosity: Invalid value"}},
		{"vmodule", "logging:\n  format: json\n  vmodule:\n  - filePattern: \"a=b\"\n    verbosity: 2\n", []string{"logging.vmodule: Forbidden", "logging.vmodule[0].filePattern: Invalid value"}},
		{"tracing sampling", "tracing:\n  samplingRatePerMillion: 2000000\n", []string{"tracing.samplingRatePerMillion: Invalid value"}},
		{"several at once", "maxPods: -1\nport: 0\nhairpinMode: veth\nkubeAPIBurst: -3\n", []string{"hairpinMode: Unsupported value", "kubeAPIBurst: Invalid value", "maxPods: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(decodeBody(t, tc.body))
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := errorKeys(errs); !slices.Equal(got, want) {
				t.Errorf("Validate() = %v\nerror keys %q, want %q", errs, got, want)
			}
			for _, err := range errs {
				if err.Field == "" || !strings.Contains(err.Error(), err.Field) {
					t.Errorf("error %q does not name its field", err)
				}
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if errs := Validate(nil); len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("Validate(nil) = %v, want one internal error", errs)
	}
}

func TestValidateMessageNamesPath(t *testing.T) {
	errs := Validate(decodeBody(t, "evictionHard:\n  memory.avilable: 100Mi\n"))
	want := `evictionHard[memory.avilable]: Unsupported value: "memory.avilable": supported values:`
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
		t.Errorf("Validate() = %v, want one error starting %q", errs, want)
	}
}
