package kubeletconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

const signalMemoryAvailable = "memory.available"

// evictionSignals are the signals the kubelet's eviction manager knows
// (pkg/kubelet/eviction/api in k8s.io/kubernetes).
var evictionSignals = []string{
	"allocatableMemory.available",
	"containerfs.available",
	"containerfs.inodesFree",
	"imagefs.available",
	"imagefs.inodesFree",
	signalMemoryAvailable,
	"nodefs.available",
	"nodefs.inodesFree",
	"pid.available",
}

// defaultHardEvictionMemory is the kubelet's memory.available hard threshold
// when evictionHard is unset (or merged with the defaults).
const defaultHardEvictionMemory = "100Mi"

func validateEviction(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateThresholds(field.NewPath("evictionHard"), cfg.EvictionHard)...)
	errs = append(errs, validateThresholds(field.NewPath("evictionSoft"), cfg.EvictionSoft)...)

	gracePath := field.NewPath("evictionSoftGracePeriod")
	for _, signal := range sortedKeys(cfg.EvictionSoftGracePeriod) {
		signalPath := gracePath.Key(signal)
		if !isEvictionSignal(signal) {
			errs = append(errs, field.NotSupported(signalPath, signal, evictionSignals))
			continue
		}
		value := cfg.EvictionSoftGracePeriod[signal]
		period, err := time.ParseDuration(value)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(signalPath, value, fmt.Sprintf("must be a duration such as 1m30s: %v", err)))
		case period < 0:
			errs = append(errs, field.Invalid(signalPath, value, "must not be negative"))
		}
	}
	for _, signal := range sortedKeys(cfg.EvictionSoft) {
		if _, ok := cfg.EvictionSoftGracePeriod[signal]; !ok && isEvictionSignal(signal) {
			errs = append(errs, field.Required(gracePath.Key(signal), fmt.Sprintf("a soft eviction threshold needs a grace period (evictionSoft[%s] is set)", signal)))
		}
	}

	reclaimPath := field.NewPath("evictionMinimumReclaim")
	for _, signal := range sortedKeys(cfg.EvictionMinimumReclaim) {
		signalPath := reclaimPath.Key(signal)
		if !isEvictionSignal(signal) {
			errs = append(errs, field.NotSupported(signalPath, signal, evictionSignals))
			continue
		}
		if msg := checkMinimumReclaim(cfg.EvictionMinimumReclaim[signal]); msg != "" {
			errs = append(errs, field.Invalid(signalPath, cfg.EvictionMinimumReclaim[signal], msg))
		}
	}
	errs = append(errs, nonNegativeDuration(field.NewPath("evictionPressureTransitionPeriod"), cfg.EvictionPressureTransitionPeriod)...)
	return errs
}

func validateThresholds(thresholdsPath *field.Path, thresholds map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, signal := range sortedKeys(thresholds) {
		signalPath := thresholdsPath.Key(signal)
		if !isEvictionSignal(signal) {
			errs = append(errs, field.NotSupported(signalPath, signal, evictionSignals))
			continue
		}
		if msg := checkThreshold(thresholds[signal]); msg != "" {
			errs = append(errs, field.Invalid(signalPath, thresholds[signal], msg))
		}
	}
	return errs
}

func isEvictionSignal(signal string) bool {
	for _, known := range evictionSignals {
		if signal == known {
			return true
		}
	}
	return false
}

// checkThreshold returns what is wrong with a threshold, or "". A threshold is
// a percentage (0% and 100% are accepted and ignored by the kubelet) or a
// positive quantity.
func checkThreshold(value string) string {
	if strings.HasSuffix(value, "%") {
		percent, err := parseEvictionPercentage(value)
		switch {
		case err != nil:
			return err.Error()
		case percent < 0 || percent > 100:
			return "a percentage must be between 0% and 100%"
		}
		return ""
	}
	quantity, err := resource.ParseQuantity(value)
	switch {
	case err != nil:
		return fmt.Sprintf("must be a quantity such as 100Mi or a percentage such as 10%%: %v", err)
	case quantity.Sign() <= 0:
		return "a quantity must be greater than zero"
	}
	return ""
}

// checkMinimumReclaim is like checkThreshold, except that a percentage must be
// positive and a quantity may be zero.
func checkMinimumReclaim(value string) string {
	if strings.HasSuffix(value, "%") {
		percent, err := parseEvictionPercentage(value)
		switch {
		case err != nil:
			return err.Error()
		case percent <= 0:
			return "a percentage must be greater than 0%"
		}
		return ""
	}
	quantity, err := resource.ParseQuantity(value)
	switch {
	case err != nil:
		return fmt.Sprintf("must be a quantity such as 500Mi or a percentage such as 5%%: %v", err)
	case quantity.Sign() < 0:
		return "a quantity must not be negative"
	}
	return ""
}

// parseEvictionPercentage reads "12.5%" as 12.5, trimming the percent signs
// as the kubelet does.
func parseEvictionPercentage(value string) (float64, error) {
	percent, err := strconv.ParseFloat(strings.TrimRight(value, "%"), 32)
	if err != nil || math.IsNaN(percent) || math.IsInf(percent, 0) {
		return 0, fmt.Errorf("%q is not a percentage", value)
	}
	return percent, nil
}

// hardEvictionMemory returns the memory the kubelet keeps back for hard
// eviction, as it computes it for Node Allocatable, and whether that can be
// known without the node's capacity (it cannot for a percentage).
func hardEvictionMemory(cfg *kubeletconfigv1beta1.KubeletConfiguration) (resource.Quantity, bool) {
	value, set := cfg.EvictionHard[signalMemoryAvailable]
	mergeDefaults := cfg.MergeDefaultEvictionSettings != nil && *cfg.MergeDefaultEvictionSettings
	if cfg.EvictionHard == nil || (!set && mergeDefaults) {
		value, set = defaultHardEvictionMemory, true
	}
	if !set {
		return resource.Quantity{}, true
	}
	if strings.HasSuffix(value, "%") {
		if value == "0%" || value == "100%" {
			return resource.Quantity{}, true // ignored by the kubelet
		}
		return resource.Quantity{}, false
	}
	quantity, err := resource.ParseQuantity(value)
	if err != nil {
		return resource.Quantity{}, false // reported by validateThresholds
	}
	return quantity, true
}
