package kubeletconfig

import (
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// validateLoggingAndTracing covers the parts of logsapi.Validate that do not
// depend on process-wide state: logsapi.Validate also inspects the global
// klog flags and the registry of log formats linked into the binary, which
// says nothing about the kubelet that will read this configuration.
func validateLoggingAndTracing(cfg *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	logging := cfg.Logging
	loggingPath := field.NewPath("logging")
	// The kubelet links in the text and JSON formats.
	errs = append(errs, oneOf(loggingPath.Child("format"), logging.Format, logsapi.DefaultLogFormat, logsapi.JSONLogFormat)...)
	if logging.FlushFrequency.Duration.Duration < 0 {
		errs = append(errs, field.Invalid(loggingPath.Child("flushFrequency"), logging.FlushFrequency.Duration.Duration.String(), "must be greater than zero"))
	}
	if logging.Verbosity > math.MaxInt32 {
		errs = append(errs, field.Invalid(loggingPath.Child("verbosity"), logging.Verbosity, fmt.Sprintf("must be at most %d", math.MaxInt32)))
	}
	vmodulePath := loggingPath.Child("vmodule")
	if len(logging.VModule) > 0 && logging.Format != "" && logging.Format != logsapi.DefaultLogFormat {
		errs = append(errs, field.Forbidden(vmodulePath, "only supported with the text log format"))
	}
	for i, item := range logging.VModule {
		itemPath := vmodulePath.Index(i)
		if item.FilePattern == "" {
			errs = append(errs, field.Required(itemPath.Child("filePattern"), "must not be empty"))
		}
		if strings.ContainsAny(item.FilePattern, "=,") {
			errs = append(errs, field.Invalid(itemPath.Child("filePattern"), item.FilePattern, "must not contain '=' or ','"))
		}
		if item.Verbosity > math.MaxInt32 {
			errs = append(errs, field.Invalid(itemPath.Child("verbosity"), item.Verbosity, fmt.Sprintf("must be at most %d", math.MaxInt32)))
		}
	}
	// The tracing validation reads no feature gate, so none is passed.
	errs = append(errs, tracingapi.ValidateTracingConfiguration(cfg.Tracing, nil, field.NewPath("tracing"))...)
	return errs
}
