package kubeletconfig

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	netutils "k8s.io/utils/net"
)

// Defaults of the kubelet (pkg/kubelet/apis/config/v1beta1/defaults.go in
// k8s.io/kubernetes) that validation needs to judge fields left unset against
// fields that are set.
const (
	defaultImageGCHighThresholdPercent = 85
	defaultImageGCLowThresholdPercent  = 80
	defaultImageMinimumGCAge           = 2 * time.Minute
)

// Validate checks a decoded configuration the way the kubelet checks its own
// at start-up, for the fields operators change most (see the package
// documentation for the list and for what is left to the kubelet). Fields left
// unset are judged by the kubelet's defaults where a rule relates them to a
// field that is set. Checks that depend on the kubelet's version or feature
// gates are in CheckFeatureGates. Every error names its field path.
func Validate(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	if cfg == nil {
		return field.ErrorList{field.InternalError(nil, errNilConfig)}
	}
	var errs field.ErrorList
	for _, check := range []func(*kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList{
		validateServing,
		validateRateLimits,
		validateNodeStatus,
		validateImages,
		validatePods,
		validateContainerLogs,
		validateShutdown,
		validateCgroups,
		validateReservations,
		validateResourceManagers,
		validateEviction,
		validateMisc,
	} {
		errs = append(errs, check(cfg)...)
	}
	return errs
}

func validateServing(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validatePort(field.NewPath("port"), cfg.Port)...)
	errs = append(errs, validatePort(field.NewPath("readOnlyPort"), cfg.ReadOnlyPort)...)
	if cfg.HealthzPort != nil {
		errs = append(errs, validatePort(field.NewPath("healthzPort"), *cfg.HealthzPort)...)
	}
	if cfg.Address != "" && netutils.ParseIPSloppy(cfg.Address) == nil {
		errs = append(errs, field.Invalid(field.NewPath("address"), cfg.Address, "must be an IP address"))
	}
	if _, err := cliflag.TLSVersion(cfg.TLSMinVersion); err != nil {
		errs = append(errs, field.NotSupported(field.NewPath("tlsMinVersion"), cfg.TLSMinVersion, cliflag.TLSPossibleVersions()))
	}
	for i, suite := range cfg.TLSCipherSuites {
		if _, err := cliflag.TLSCipherSuites([]string{suite}); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("tlsCipherSuites").Index(i), suite, "unknown TLS cipher suite"))
		}
	}
	switch cfg.Authorization.Mode {
	case "", kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("authorization", "mode"), cfg.Authorization.Mode,
			[]kubeletconfigv1beta1.KubeletAuthorizationMode{kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook}))
	}
	return errs
}

// validatePort accepts 0, which means "default" for port and "disabled" for
// readOnlyPort and healthzPort.
func validatePort(path *field.Path, port int32) field.ErrorList {
	if port == 0 {
		return nil
	}
	if msgs := utilvalidation.IsValidPortNum(int(port)); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, port, msgs[0])}
	}
	return nil
}

func validateRateLimits(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(field.NewPath("kubeAPIQPS"), cfg.KubeAPIQPS)...)
	errs = append(errs, nonNegative(field.NewPath("kubeAPIBurst"), &cfg.KubeAPIBurst)...)
	errs = append(errs, nonNegative(field.NewPath("eventRecordQPS"), cfg.EventRecordQPS)...)
	errs = append(errs, nonNegative(field.NewPath("eventBurst"), &cfg.EventBurst)...)
	errs = append(errs, nonNegative(field.NewPath("registryPullQPS"), cfg.RegistryPullQPS)...)
	errs = append(errs, nonNegative(field.NewPath("registryBurst"), &cfg.RegistryBurst)...)
	return errs
}

func validateNodeStatus(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	// A zero frequency means "default"; a negative one would make the status
	// loop spin, which the kubelet does not check.
	errs = append(errs, nonNegativeDuration(field.NewPath("nodeStatusUpdateFrequency"), cfg.NodeStatusUpdateFrequency)...)
	errs = append(errs, nonNegativeDuration(field.NewPath("nodeStatusReportFrequency"), cfg.NodeStatusReportFrequency)...)
	errs = append(errs, nonNegative(field.NewPath("nodeLeaseDurationSeconds"), &cfg.NodeLeaseDurationSeconds)...)
	if cfg.NodeStatusMaxImages != nil && *cfg.NodeStatusMaxImages < -1 {
		errs = append(errs, field.Invalid(field.NewPath("nodeStatusMaxImages"), *cfg.NodeStatusMaxImages, "must be -1 (no limit) or greater"))
	}
	return errs
}

func validateImages(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	high, low := int32(defaultImageGCHighThresholdPercent), int32(defaultImageGCLowThresholdPercent)
	if cfg.ImageGCHighThresholdPercent != nil {
		high = *cfg.ImageGCHighThresholdPercent
		errs = append(errs, inRange(field.NewPath("imageGCHighThresholdPercent"), high, 0, 100)...)
	}
	if cfg.ImageGCLowThresholdPercent != nil {
		low = *cfg.ImageGCLowThresholdPercent
		errs = append(errs, inRange(field.NewPath("imageGCLowThresholdPercent"), low, 0, 100)...)
	}
	if low >= high {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low,
			fmt.Sprintf("must be less than imageGCHighThresholdPercent (%d)", high)))
	}

	errs = append(errs, nonNegativeDuration(field.NewPath("imageMinimumGCAge"), cfg.ImageMinimumGCAge)...)
	errs = append(errs, nonNegativeDuration(field.NewPath("imageMaximumGCAge"), cfg.ImageMaximumGCAge)...)
	minAge := cmp.Or(cfg.ImageMinimumGCAge.Duration, defaultImageMinimumGCAge)
	if maxAge := cfg.ImageMaximumGCAge.Duration; maxAge > 0 && maxAge <= minAge {
		errs = append(errs, field.Invalid(field.NewPath("imageMaximumGCAge"), cfg.ImageMaximumGCAge.Duration.String(),
			fmt.Sprintf("must be greater than imageMinimumGCAge (%s)", minAge)))
	}

	if cfg.MaxParallelImagePulls != nil {
		if parallel := *cfg.MaxParallelImagePulls; parallel < 1 {
			errs = append(errs, field.Invalid(field.NewPath("maxParallelImagePulls"), parallel, "must be at least 1"))
		} else if parallel > 1 && cfg.SerializeImagePulls != nil && *cfg.SerializeImagePulls {
			// Left unset, serializeImagePulls defaults to false when
			// maxParallelImagePulls allows parallel pulls.
			errs = append(errs, field.Invalid(field.NewPath("maxParallelImagePulls"), parallel, "must be 1 or unset while serializeImagePulls is true"))
		}
	}

	policyPath := field.NewPath("imagePullCredentialsVerificationPolicy")
	switch policy := cfg.ImagePullCredentialsVerificationPolicy; policy {
	case "", kubeletconfigv1beta1.NeverVerify, kubeletconfigv1beta1.NeverVerifyPreloadedImages,
		kubeletconfigv1beta1.NeverVerifyAllowlistedImages, kubeletconfigv1beta1.AlwaysVerify:
	default:
		errs = append(errs, field.NotSupported(policyPath, policy, []kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy{
			kubeletconfigv1beta1.NeverVerify, kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			kubeletconfigv1beta1.NeverVerifyAllowlistedImages, kubeletconfigv1beta1.AlwaysVerify,
		}))
	}
	if len(cfg.PreloadedImagesVerificationAllowlist) > 0 && cfg.ImagePullCredentialsVerificationPolicy != kubeletconfigv1beta1.NeverVerifyAllowlistedImages {
		errs = append(errs, field.Forbidden(field.NewPath("preloadedImagesVerificationAllowlist"),
			fmt.Sprintf("may only be set when %s is %q", policyPath, kubeletconfigv1beta1.NeverVerifyAllowlistedImages)))
	}
	return errs
}

func validateMisc(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if cfg.RunOnce {
		errs = append(errs, field.Forbidden(field.NewPath("runOnce"), "run-once mode is deprecated and must not be set"))
	}
	errs = append(errs, oneOf(field.NewPath("hairpinMode"), cfg.HairpinMode,
		kubeletconfigv1beta1.PromiscuousBridge, kubeletconfigv1beta1.HairpinVeth, kubeletconfigv1beta1.HairpinNone)...)
	if cfg.IPTablesMasqueradeBit != nil {
		errs = append(errs, inRange(field.NewPath("iptablesMasqueradeBit"), *cfg.IPTablesMasqueradeBit, 0, 31)...)
	}
	if cfg.IPTablesDropBit != nil {
		errs = append(errs, inRange(field.NewPath("iptablesDropBit"), *cfg.IPTablesDropBit, 0, 31)...)
	}
	if period := cfg.CPUCFSQuotaPeriod; period != nil && (period.Duration < time.Millisecond || period.Duration > time.Second) {
		errs = append(errs, field.Invalid(field.NewPath("cpuCFSQuotaPeriod"), period.Duration.String(), "must be between 1ms and 1s, inclusive"))
	}
	if restart := cfg.CrashLoopBackOff.MaxContainerRestartPeriod; restart != nil && (restart.Duration < time.Second || restart.Duration > 300*time.Second) {
		errs = append(errs, field.Invalid(field.NewPath("crashLoopBackOff", "maxContainerRestartPeriod"), restart.Duration.String(), "must be between 1s and 300s, inclusive"))
	}
	if factor := cfg.MemoryThrottlingFactor; factor != nil && !(*factor > 0 && *factor <= 1) {
		errs = append(errs, field.Invalid(field.NewPath("memoryThrottlingFactor"), *factor, "must be greater than 0 and at most 1.0"))
	}
	switch policy := cfg.MemoryReservationPolicy; policy {
	case "", kubeletconfigv1beta1.NoneMemoryReservationPolicy, kubeletconfigv1beta1.TieredReservationMemoryReservationPolicy:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("memoryReservationPolicy"), policy,
			[]kubeletconfigv1beta1.MemoryReservationPolicy{kubeletconfigv1beta1.NoneMemoryReservationPolicy, kubeletconfigv1beta1.TieredReservationMemoryReservationPolicy}))
	}
	switch strategy := cfg.ConfigMapAndSecretChangeDetectionStrategy; strategy {
	case "", kubeletconfigv1beta1.GetChangeDetectionStrategy, kubeletconfigv1beta1.TTLCacheChangeDetectionStrategy, kubeletconfigv1beta1.WatchChangeDetectionStrategy:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("configMapAndSecretChangeDetectionStrategy"), strategy,
			[]kubeletconfigv1beta1.ResourceChangeDetectionStrategy{kubeletconfigv1beta1.GetChangeDetectionStrategy, kubeletconfigv1beta1.TTLCacheChangeDetectionStrategy, kubeletconfigv1beta1.WatchChangeDetectionStrategy}))
	}
	if cfg.EnableSystemLogQuery != nil && *cfg.EnableSystemLogQuery && cfg.EnableSystemLogHandler != nil && !*cfg.EnableSystemLogHandler {
		errs = append(errs, field.Invalid(field.NewPath("enableSystemLogHandler"), false, "must be true when enableSystemLogQuery is true"))
	}
	errs = append(errs, validateUserNamespaces(cfg)...)
	errs = append(errs, validateLoggingAndTracing(cfg)...)
	return errs
}

type signedInt interface {
	~int32 | ~int64
}

// nonNegative takes a pointer so that optional fields can be passed as they
// are; nil (unset) is valid.
func nonNegative[T signedInt](path *field.Path, value *T) field.ErrorList {
	if value == nil || *value >= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, *value, "must not be negative")}
}

func inRange[T signedInt](path *field.Path, value, lowest, highest T) field.ErrorList {
	if value < lowest || value > highest {
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("must be between %d and %d, inclusive", lowest, highest))}
	}
	return nil
}

func nonNegativeDuration(path *field.Path, d metav1.Duration) field.ErrorList {
	if d.Duration < 0 {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must not be negative")}
	}
	return nil
}

// sortedKeys makes errors about map entries come out in a stable order.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// maxErrorsInSummary keeps a refusal readable (and small) when a config has
// many problems; the first ones name the fields to fix.
const maxErrorsInSummary = 5

// Summarize renders errs for a refusal: all of them up to five, then the
// first five and a count.
func Summarize(errs field.ErrorList) string {
	if len(errs) <= maxErrorsInSummary {
		return errs.ToAggregate().Error()
	}
	return fmt.Sprintf("%v, and %d more errors", errs[:maxErrorsInSummary].ToAggregate(), len(errs)-maxErrorsInSummary)
}
