package kubeletconfig

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	netutils "k8s.io/utils/net"
)

func validatePods(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(field.NewPath("maxPods"), &cfg.MaxPods)...)
	errs = append(errs, nonNegative(field.NewPath("podsPerCore"), &cfg.PodsPerCore)...)
	errs = append(errs, nonNegative(field.NewPath("maxOpenFiles"), &cfg.MaxOpenFiles)...)
	if cfg.PodPidsLimit != nil && *cfg.PodPidsLimit < -1 {
		// The kubelet quietly turns any negative value into -1; a value below
		// -1 is most likely a typo, so it is refused here.
		errs = append(errs, field.Invalid(field.NewPath("podPidsLimit"), *cfg.PodPidsLimit, "must be -1 (no limit) or greater"))
	}
	if cfg.OOMScoreAdj != nil {
		errs = append(errs, inRange(field.NewPath("oomScoreAdj"), *cfg.OOMScoreAdj, -1000, 1000)...)
	}
	if cfg.ResolverConfig != nil && *cfg.ResolverConfig != "" && !path.IsAbs(*cfg.ResolverConfig) {
		// The kubelet would open a relative path against its working directory.
		errs = append(errs, field.Invalid(field.NewPath("resolvConf"), *cfg.ResolverConfig, "must be an absolute path, or empty to give pods no host DNS configuration"))
	}
	for i, dns := range cfg.ClusterDNS {
		// The kubelet logs and skips an address it cannot parse, leaving pods
		// without that resolver.
		if netutils.ParseIPSloppy(dns) == nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterDNS").Index(i), dns, "must be an IP address"))
		}
	}
	if dir := cfg.PodLogsDir; dir != "" {
		logsPath := field.NewPath("podLogsDir")
		switch {
		case !path.IsAbs(dir):
			errs = append(errs, field.Invalid(logsPath, dir, "must be an absolute path"))
		case path.Clean(dir) != dir:
			errs = append(errs, field.Invalid(logsPath, dir, fmt.Sprintf("must be a clean path (%s)", path.Clean(dir))))
		}
		// The kubelet uses the path in metric labels.
		if strings.ContainsFunc(dir, func(r rune) bool { return r > unicode.MaxASCII }) {
			errs = append(errs, field.Invalid(logsPath, dir, "must contain ASCII characters only"))
		}
	}
	for i, taint := range cfg.RegisterWithTaints {
		errs = append(errs, validateTaint(field.NewPath("registerWithTaints").Index(i), taint)...)
	}
	errs = append(errs, validateDefaultPodSysctls(cfg.DefaultPodSysctls)...)
	return errs
}

func validateTaint(taintPath *field.Path, taint corev1.Taint) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(taint.Key) {
		errs = append(errs, field.Invalid(taintPath.Child("key"), taint.Key, msg))
	}
	if taint.Value != "" {
		for _, msg := range utilvalidation.IsValidLabelValue(taint.Value) {
			errs = append(errs, field.Invalid(taintPath.Child("value"), taint.Value, msg))
		}
	}
	switch taint.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(taintPath.Child("effect"), taint.Effect,
			[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	if taint.TimeAdded != nil {
		errs = append(errs, field.Forbidden(taintPath.Child("timeAdded"), "must not be set"))
	}
	return errs
}

// sysctlName is the kubelet's (and the pod API's) syntax for sysctl names,
// with either dots or slashes as separators.
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

const maxSysctlNameLength = 253

func validateDefaultPodSysctls(sysctls map[string]string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]string{}
	for _, name := range sortedKeys(sysctls) {
		namePath := field.NewPath("defaultPodSysctls").Key(name)
		if len(name) > maxSysctlNameLength || !sysctlName.MatchString(name) {
			errs = append(errs, field.Invalid(namePath, name, "not a valid sysctl name"))
			continue
		}
		normalized := normalizeSysctlName(name)
		if other, dup := seen[normalized]; dup {
			errs = append(errs, field.Duplicate(namePath, fmt.Sprintf("%s (same sysctl as %s)", name, other)))
			continue
		}
		seen[normalized] = name
	}
	return errs
}

// normalizeSysctlName turns the slash-separated form (net/ipv4/ip_forward)
// into the dotted one, as the kubelet does before applying a sysctl: when the
// first separator is a slash, slashes and dots swap roles.
func normalizeSysctlName(name string) string {
	first := strings.IndexAny(name, "./")
	if first < 0 || name[first] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, name)
}

const (
	minContainerLogMonitorInterval = 3 * time.Second
	defaultContainerLogMaxFiles    = 5
)

func validateContainerLogs(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if size := cfg.ContainerLogMaxSize; size != "" {
		sizePath := field.NewPath("containerLogMaxSize")
		quantity, err := resource.ParseQuantity(size)
		if err != nil {
			errs = append(errs, field.Invalid(sizePath, size, fmt.Sprintf("must be a quantity such as 10Mi: %v", err)))
		} else if _, ok := quantity.AsInt64(); !ok {
			errs = append(errs, field.Invalid(sizePath, size, "must be a whole number of bytes that fits in 64 bits"))
		}
	}
	if files := cfg.ContainerLogMaxFiles; files != nil && *files < 2 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxFiles"), *files, fmt.Sprintf("must be at least 2 (default %d)", defaultContainerLogMaxFiles)))
	}
	if workers := cfg.ContainerLogMaxWorkers; workers != nil && *workers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxWorkers"), *workers, "must be at least 1"))
	}
	if interval := cfg.ContainerLogMonitorInterval; interval != nil && interval.Duration < minContainerLogMonitorInterval {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMonitorInterval"), interval.Duration.String(),
			fmt.Sprintf("must be at least %s", minContainerLogMonitorInterval)))
	}
	return errs
}

func validateShutdown(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	grace, critical := cfg.ShutdownGracePeriod.Duration, cfg.ShutdownGracePeriodCriticalPods.Duration
	for _, period := range []struct {
		name  string
		value time.Duration
	}{{"shutdownGracePeriod", grace}, {"shutdownGracePeriodCriticalPods", critical}} {
		if period.value < 0 || (period.value > 0 && period.value < time.Second) {
			errs = append(errs, field.Invalid(field.NewPath(period.name), period.value.String(), "must be zero or at least 1s"))
		}
	}
	if critical > grace {
		errs = append(errs, field.Invalid(field.NewPath("shutdownGracePeriodCriticalPods"), critical.String(),
			fmt.Sprintf("must not exceed shutdownGracePeriod (%s)", grace)))
	}
	if len(cfg.ShutdownGracePeriodByPodPriority) > 0 && (grace > 0 || critical > 0) {
		errs = append(errs, field.Forbidden(field.NewPath("shutdownGracePeriodByPodPriority"),
			"may not be set together with shutdownGracePeriod or shutdownGracePeriodCriticalPods"))
	}
	return errs
}

// userNamespaceUnit is the granularity of the ID ranges the kubelet hands to
// pods with user namespaces.
const userNamespaceUnit = 1 << 16

func validateUserNamespaces(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	if cfg.UserNamespaces == nil || cfg.UserNamespaces.IDsPerPod == nil {
		return nil
	}
	ids := *cfg.UserNamespaces.IDsPerPod
	idsPath := field.NewPath("userNamespaces", "idsPerPod")
	switch {
	case ids < userNamespaceUnit:
		return field.ErrorList{field.Invalid(idsPath, ids, fmt.Sprintf("must be at least %d", userNamespaceUnit))}
	case ids%userNamespaceUnit != 0:
		return field.ErrorList{field.Invalid(idsPath, ids, fmt.Sprintf("must be a multiple of %d", userNamespaceUnit))}
	case ids > math.MaxUint32:
		return field.ErrorList{field.Invalid(idsPath, ids, fmt.Sprintf("must be at most %d", int64(math.MaxUint32)))}
	}
	return nil
}
