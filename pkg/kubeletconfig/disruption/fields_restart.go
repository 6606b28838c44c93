package disruption

// Why a change of each of the restart fields needs no more than a restart,
// shared by fields alike. What they have in common: the kubelet reads them
// at start-up, records nothing a later start checks them against, and does
// not reject a pod it admitted before because of them. A restart field can
// still make the kubelet fail to start or misbehave; that is what the trial
// after every restart is for.
const (
	whyServing    = "how the kubelet serves its own API, health, metrics and debug endpoints; nothing recorded or running depends on it"
	whyClient     = "how the kubelet talks to the apiserver; nothing recorded or running depends on it"
	whyNodeStatus = "how often and how much the kubelet reports about its Node; nothing recorded or running depends on it"
	whyPeriod     = "a period or timeout of one of the kubelet's loops; nothing recorded depends on it"
	whyImages     = "image pulls and image garbage collection; containers keep the images they run (an image in use is never collected)"
	whyContainers = "applied to containers and pod cgroups as the kubelet creates or updates them; the kubelet records nothing with it and does not reject running pods over it"
	whyLogs       = "container log rotation; the kubelet rotates the logs of running containers under the new settings"
	whyStaticPods = "where static pods come from; after the restart the kubelet runs the static pods the new source lists and stops the others, which is what the change asks for"
	whyEviction   = "soft eviction and reclaim count in no allocatable, so no running pod is rejected; a tighter threshold evicts under pressure, which the trial watches"
	whyPodDNS     = "written into the resolv.conf of pods created afterwards; running pods keep theirs"
	whyRegister   = "used when the kubelet registers its Node, which already exists"
	whyNetwork    = "network plumbing the kubelet sets up for itself or for new pod sandboxes; running pods keep theirs"
	whyShutdown   = "how the kubelet stops pods when the node shuts down; read at start-up (its own state file records only when a shutdown happened)"
	whyLogging    = "the kubelet's own logs and traces"
	whyLimits     = "limits of the kubelet process itself"
	whyReservedCg = "a cgroup the kubelet limits to the reservations when enforceNodeAllocatable asks it to; pods' cgroups are not under it"
)

// restartFields are the fields every change of which a restart carries.
var restartFields = []Field{
	restart("apiVersion", "identifies the configuration (kubelet.config.k8s.io/v1beta1); no other value is a kubelet configuration"),
	restart("kind", "identifies the configuration (KubeletConfiguration); no other value is a kubelet configuration"),

	restart("enableServer", whyServing),
	restart("address", whyServing),
	restart("port", whyServing),
	restart("readOnlyPort", whyServing),
	restart("tlsCertFile", whyServing),
	restart("tlsPrivateKeyFile", whyServing),
	restart("tlsCipherSuites", whyServing),
	restart("tlsCurvePreferences", whyServing),
	restart("tlsMinVersion", whyServing),
	restart("rotateCertificates", "client certificate rotation; the kubelet's certificates are files it reloads, not state tied to pods"),
	restart("serverTLSBootstrap", "serving certificate requests; the kubelet's certificates are files it reloads, not state tied to pods"),
	restart("authentication", whyServing),
	restart("authorization", whyServing),
	restart("enableDebuggingHandlers", whyServing),
	restart("enableContentionProfiling", whyServing),
	restart("enableProfilingHandler", whyServing),
	restart("enableDebugFlagsHandler", whyServing),
	restart("enableSystemLogHandler", whyServing),
	restart("enableSystemLogQuery", whyServing),
	restart("healthzPort", whyServing),
	restart("healthzBindAddress", whyServing),
	restart("streamingConnectionIdleTimeout", whyServing),
	restart("showHiddenMetricsForVersion", whyServing),

	restart("kubeAPIQPS", whyClient),
	restart("kubeAPIBurst", whyClient),
	restart("contentType", whyClient),
	restart("eventRecordQPS", whyClient),
	restart("eventBurst", whyClient),
	restart("configMapAndSecretChangeDetectionStrategy", "how the kubelet follows the ConfigMaps and Secrets pods mount; it re-registers the running pods' objects at start-up"),

	restart("nodeStatusUpdateFrequency", whyNodeStatus),
	restart("nodeStatusReportFrequency", whyNodeStatus),
	restart("nodeLeaseDurationSeconds", whyNodeStatus),
	restart("nodeStatusMaxImages", whyNodeStatus),

	restart("syncFrequency", whyPeriod),
	restart("fileCheckFrequency", whyPeriod),
	restart("httpCheckFrequency", whyPeriod),
	restart("runtimeRequestTimeout", whyPeriod),
	restart("volumeStatsAggPeriod", whyPeriod),
	restart("evictionPressureTransitionPeriod", whyPeriod),
	restart("cpuManagerReconcilePeriod", "how often the CPU manager re-applies the cpusets it recorded; its checkpoint does not record the period"),

	restart("staticPodPath", whyStaticPods),
	restart("staticPodURL", whyStaticPods),
	restart("staticPodURLHeader", whyStaticPods),

	restart("registryPullQPS", whyImages),
	restart("registryBurst", whyImages),
	restart("imagePullCredentialsVerificationPolicy", "which pods may use an image already on the node, checked as containers start; no pod is rejected at admission over it"),
	restart("preloadedImagesVerificationAllowlist", "as imagePullCredentialsVerificationPolicy"),
	restart("imageMinimumGCAge", whyImages),
	restart("imageMaximumGCAge", whyImages),
	restart("imageGCHighThresholdPercent", whyImages),
	restart("imageGCLowThresholdPercent", whyImages),
	restart("serializeImagePulls", whyImages),
	restart("maxParallelImagePulls", whyImages),
	restart("containerRuntimeEndpoint", "where the kubelet finds the container runtime; the same runtime at another address changes nothing, and moving a node to another runtime is a migration no configuration rollout performs"),
	restart("imageServiceEndpoint", "as containerRuntimeEndpoint, for the image service"),

	restart("podPidsLimit", whyContainers),
	restart("cpuCFSQuota", whyContainers),
	restart("cpuCFSQuotaPeriod", whyContainers),
	restart("memoryThrottlingFactor", whyContainers),
	restart("memoryReservationPolicy", whyContainers),
	restart("singleProcessOOMKill", whyContainers),
	restart("memorySwap", whyContainers),
	restart("seccompDefault", whyContainers),
	restart("defaultPodSysctls", whyContainers),
	restart("qosReserved", "memory the QoS cgroups hold back for higher classes (QOSReserved gate); the kubelet updates those limits as pods come and go and does not reject running pods over it"),

	restart("kubeletCgroups", "the cgroup the kubelet moves itself into; no pod's cgroup is under it"),
	restart("systemCgroups", "the cgroup the kubelet moves the root cgroup's other processes into; pods are in their own cgroups and untouched (moving processes back needs a reboot, which a drain would not replace)"),
	restart("kubeReservedCgroup", whyReservedCg),
	restart("systemReservedCgroup", whyReservedCg),
	restart("failCgroupV1", "whether the kubelet refuses to start on cgroup v1; a refusal shows in the trial"),
	restart("kernelMemcgNotification", "how the eviction manager learns of memory pressure; nothing recorded depends on it"),

	restart("evictionSoft", whyEviction),
	restart("evictionSoftGracePeriod", whyEviction),
	restart("evictionMaxPodGracePeriod", whyEviction),
	restart("evictionMinimumReclaim", whyEviction),

	restart("containerLogMaxSize", whyLogs),
	restart("containerLogMaxFiles", whyLogs),
	restart("containerLogMaxWorkers", whyLogs),
	restart("containerLogMonitorInterval", whyLogs),
	restart("podLogsDir", "where the logs of containers created afterwards go; running containers keep their log paths"),

	restart("clusterDomain", whyPodDNS),
	restart("clusterDNS", whyPodDNS),
	restart("resolvConf", whyPodDNS),
	restart("hairpinMode", whyNetwork),
	restart("podCIDR", whyNetwork),
	restart("makeIPTablesUtilChains", whyNetwork),
	restart("iptablesMasqueradeBit", whyNetwork),
	restart("iptablesDropBit", whyNetwork),

	restart("registerNode", whyRegister),
	restart("registerWithTaints", whyRegister),
	restart("providerID", whyRegister),

	restart("shutdownGracePeriod", whyShutdown),
	restart("shutdownGracePeriodCriticalPods", whyShutdown),
	restart("shutdownGracePeriodByPodPriority", whyShutdown),

	restart("logging", whyLogging),
	restart("tracing", whyLogging),

	restart("oomScoreAdj", whyLimits),
	restart("maxOpenFiles", whyLimits),

	restart("protectKernelDefaults", "whether the kubelet refuses to start when kernel settings differ from its expectations; a refusal shows in the trial"),
	restart("failSwapOn", "whether the kubelet refuses to start with swap on; a refusal shows in the trial"),
	restart("runOnce", "makes the kubelet run the static pods once and exit; the trial sees a kubelet that does not stay up"),
	restart("enableControllerAttachDetach", "who attaches and detaches volumes; attached volumes stay attached, and the attach/detach controller keeps a node it managed"),
	restart("volumePluginDir", "where the kubelet looks for FlexVolume drivers; it probes them again at start-up"),
	restart("crashLoopBackOff", "the back-off between container restarts; kept in memory only"),
}

func restart(name, why string) Field {
	return Field{Name: name, Need: NeedRestart, When: always, Why: why}
}
