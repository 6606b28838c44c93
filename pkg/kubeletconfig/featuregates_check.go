package kubeletconfig

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// CheckFeatureGates checks a configuration against what a kubelet of
// kubeletVersion accepts, as the kubelet itself would at start-up:
//
//   - every gate named in featureGates must be known to that kubelet (and not
//     pre-alpha there);
//   - a gate locked to its default at that version may only be set to that
//     default;
//   - fields that only work behind a feature gate (memorySwap behind NodeSwap,
//     shutdownGracePeriod behind GracefulNodeShutdown, ...) need that gate
//     enabled, by featureGates or by its default at that version.
//
// For a kubelet older than the data covers (see FeatureGateCoverage) nothing can
// be checked: a configuration that sets featureGates is refused with one error
// saying so, and one that sets none passes.
func CheckFeatureGates(cfg *kubeletconfigv1beta1.KubeletConfiguration, kubeletVersion *version.Version) field.ErrorList {
	return generatedGates.check(cfg, kubeletVersion)
}

func (d *gateData) check(cfg *kubeletconfigv1beta1.KubeletConfiguration, kubeletVersion *version.Version) field.ErrorList {
	gatesPath := field.NewPath("featureGates")
	switch {
	case cfg == nil:
		return field.ErrorList{field.InternalError(gatesPath, errNilConfig)}
	case kubeletVersion == nil:
		return field.ErrorList{field.InternalError(gatesPath, errors.New("no kubelet version given"))}
	}
	at := minorOf(kubeletVersion)
	if at.less(d.oldest) {
		if len(cfg.FeatureGates) == 0 {
			return nil
		}
		return field.ErrorList{field.Invalid(gatesPath, kubeletVersion.String(),
			fmt.Sprintf("cannot check feature gates for kubelet %s: the feature-gate data (from %s) covers kubelet %s and newer", at, d.source, d.oldest))}
	}

	var errs field.ErrorList
	for _, name := range sortedKeys(cfg.FeatureGates) {
		value := cfg.FeatureGates[name]
		path := gatesPath.Key(name)
		stage, known := d.stageAt(name, at)
		switch {
		case !known:
			errs = append(errs, field.Invalid(path, value, d.unknownGateDetail(name, at)))
		case stage.lockToDefault && value != stage.defaultValue:
			errs = append(errs, field.Forbidden(path,
				fmt.Sprintf("feature gate %s is locked to %t at kubelet %s (%s since %s)", name, stage.defaultValue, at, stage.stage, stage.since)))
		}
	}
	for _, gated := range gatedFields {
		if !gated.inUse(cfg) {
			continue
		}
		enabled, known := d.gateEnabled(cfg, gated.gate, at)
		switch {
		case !known:
			errs = append(errs, field.Forbidden(field.NewPath(gated.path[0], gated.path[1:]...),
				fmt.Sprintf("requires feature gate %s, which kubelet %s does not have", gated.gate, at)))
		case !enabled:
			errs = append(errs, field.Forbidden(field.NewPath(gated.path[0], gated.path[1:]...),
				fmt.Sprintf("requires feature gate %s, which is disabled for kubelet %s", gated.gate, at)))
		}
	}
	return errs
}

func (d *gateData) unknownGateDetail(name string, at minorVersion) string {
	if first, ok := d.firstKnown(name); ok && at.less(first) {
		return fmt.Sprintf("feature gate %s is not available before kubelet %s (this kubelet is %s)", name, first, at)
	}
	if d.newest.less(at) {
		return fmt.Sprintf("unknown feature gate for kubelet %s as far as the feature-gate data (from %s, up to kubelet %s) knows", at, d.source, d.newest)
	}
	return fmt.Sprintf("unknown feature gate for kubelet %s", at)
}

// gateEnabled resolves a gate the way the kubelet does: an explicit setting
// wins, then AllAlpha/AllBeta for gates at that stage, then the default.
func (d *gateData) gateEnabled(cfg *kubeletconfigv1beta1.KubeletConfiguration, name string, at minorVersion) (enabled, known bool) {
	stage, ok := d.stageAt(name, at)
	if !ok {
		return false, false
	}
	if value, set := cfg.FeatureGates[name]; set {
		return value, true
	}
	switch stage.stage {
	case stageAlpha:
		if value, set := cfg.FeatureGates[allAlphaGate]; set {
			return value, true
		}
	case stageBeta:
		if value, set := cfg.FeatureGates[allBetaGate]; set {
			return value, true
		}
	}
	return stage.defaultValue, true
}

// gatedField is a field the kubelet refuses unless a feature gate is on
// (pkg/kubelet/apis/config/validation in k8s.io/kubernetes).
type gatedField struct {
	gate  string
	path  []string
	inUse func(*kubeletconfigv1beta1.KubeletConfiguration) bool
}

// formerMemoryThrottlingFactor was the default before MemoryQoS; the kubelet
// still accepts it with the gate off so that old files keep working.
const formerMemoryThrottlingFactor = 0.9

var gatedFields = []gatedField{
	{gate: "CustomCPUCFSQuotaPeriod", path: []string{"cpuCFSQuotaPeriod"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.CPUCFSQuotaPeriod != nil && c.CPUCFSQuotaPeriod.Duration != defaultCPUCFSQuotaPeriod
	}},
	{gate: "DefaultPodSysctls", path: []string{"defaultPodSysctls"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return len(c.DefaultPodSysctls) > 0
	}},
	{gate: "GracefulNodeShutdown", path: []string{"shutdownGracePeriod"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.ShutdownGracePeriod.Duration > 0 || c.ShutdownGracePeriodCriticalPods.Duration > 0
	}},
	{gate: "GracefulNodeShutdownBasedOnPodPriority", path: []string{"shutdownGracePeriodByPodPriority"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return len(c.ShutdownGracePeriodByPodPriority) > 0
	}},
	{gate: "ImageMaximumGCAge", path: []string{"imageMaximumGCAge"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.ImageMaximumGCAge.Duration != 0
	}},
	{gate: "KubeletCrashLoopBackOffMax", path: []string{"crashLoopBackOff", "maxContainerRestartPeriod"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.CrashLoopBackOff.MaxContainerRestartPeriod != nil
	}},
	{gate: "KubeletEnsureSecretPulledImages", path: []string{"imagePullCredentialsVerificationPolicy"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.ImagePullCredentialsVerificationPolicy != ""
	}},
	{gate: "KubeletEnsureSecretPulledImages", path: []string{"preloadedImagesVerificationAllowlist"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return len(c.PreloadedImagesVerificationAllowlist) > 0
	}},
	{gate: "MemoryQoS", path: []string{"memoryThrottlingFactor"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.MemoryThrottlingFactor != nil && *c.MemoryThrottlingFactor != formerMemoryThrottlingFactor
	}},
	{gate: "MemoryQoS", path: []string{"memoryReservationPolicy"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.MemoryReservationPolicy == kubeletconfigv1beta1.TieredReservationMemoryReservationPolicy
	}},
	{gate: "NodeLogQuery", path: []string{"enableSystemLogQuery"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.EnableSystemLogQuery != nil && *c.EnableSystemLogQuery
	}},
	{gate: "NodeSwap", path: []string{"memorySwap"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.MemorySwap != (kubeletconfigv1beta1.MemorySwapConfiguration{})
	}},
	{gate: "RotateKubeletServerCertificate", path: []string{"serverTLSBootstrap"}, inUse: func(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return c.ServerTLSBootstrap
	}},
}

// defaultCPUCFSQuotaPeriod is the kubelet's default, which needs no gate.
const defaultCPUCFSQuotaPeriod = 100 * time.Millisecond
