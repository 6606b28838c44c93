package settings

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// APIVersion and Kind identify the settings file's format. They are the
// file's user-facing names and do not change with the Go type's name.
const (
	APIVersion = "config.nodeguard.dev/v1alpha1"
	Kind       = "NodeguardPolicy"
)

// File is the settings file (a NodeguardPolicy) as written.
type File struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// MinKubeletVersion, e.g. "1.35.0", refuses registration (admission)
	// and everything but their own Node (authorization) to older kubelets.
	// Empty disables the check.
	MinKubeletVersion string `json:"minKubeletVersion,omitempty"`
	// AllowNodeSelfAssignment lets a node set its own config-source
	// annotation (to an eligible ConfigMap). Off by default, as upstream
	// NodeRestriction was.
	AllowNodeSelfAssignment bool `json:"allowNodeSelfAssignment,omitempty"`
	// ForbiddenDynamicFields are KubeletConfiguration fields, as top-level
	// JSON names (e.g. "staticPodPath"), that an eligible ConfigMap may not
	// set on creation nor change on update.
	ForbiddenDynamicFields []string `json:"forbiddenDynamicFields,omitempty"`
	// ExemptUsers are users whose requests skip the content and
	// feature-gate checks (feature-gates and config-content), e.g. a break-glass account.
	// Nodes are never exempt.
	ExemptUsers []string `json:"exemptUsers,omitempty"`
	// AllocatableFloorPercent is the share of a Node's capacity (cpu,
	// memory, ephemeral-storage) an assigned configuration's reservations
	// must leave allocatable; an assignment that leaves less is allowed
	// with a warning. Unset is DefaultAllocatableFloorPercent; 0 turns the
	// warning off.
	AllocatableFloorPercent *int32 `json:"allocatableFloorPercent,omitempty"`
}

// DefaultAllocatableFloorPercent is the floor of AllocatableFloorPercent
// when the file gives none: a configuration that reserves more than half
// a Node's cpu, memory or disk away from its pods is most likely a
// mistake of units or of Node size.
const DefaultAllocatableFloorPercent = 50

// Settings are a decoded, validated NodeguardPolicy. They are immutable.
type Settings struct {
	MinKubeletVersion       *version.Version
	AllowNodeSelfAssignment bool
	ForbiddenDynamicFields  []string
	ExemptUsers             []string
	// AllocatableFloorPercent warns of assignments that leave less of a
	// Node's capacity allocatable; 0 never warns.
	AllocatableFloorPercent int
	// Source says where the settings came from, for logs and readiness.
	Source string
}

// Default returns the settings in force when no file is given: no minimum
// version, no self-assignment, nothing forbidden, nobody exempt.
func Default() *Settings {
	return &Settings{Source: "built-in defaults", AllocatableFloorPercent: DefaultAllocatableFloorPercent}
}

// IsExempt reports whether user skips the content checks.
func (s *Settings) IsExempt(user string) bool { return slices.Contains(s.ExemptUsers, user) }

// IsForbiddenField reports whether a top-level KubeletConfiguration field
// may not change dynamically.
func (s *Settings) IsForbiddenField(field string) bool {
	return slices.Contains(s.ForbiddenDynamicFields, field)
}

// Parse decodes and validates a settings file's content.
func Parse(data []byte, source string) (*Settings, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var errs []error
	if f.APIVersion != APIVersion || f.Kind != Kind {
		errs = append(errs, fmt.Errorf("apiVersion/kind: want %s %s, got %q %q", APIVersion, Kind, f.APIVersion, f.Kind))
	}
	s := &Settings{AllowNodeSelfAssignment: f.AllowNodeSelfAssignment, Source: source}
	if f.MinKubeletVersion != "" {
		v, err := version.ParseGeneric(f.MinKubeletVersion)
		if err != nil {
			errs = append(errs, fmt.Errorf("minKubeletVersion: %w", err))
		}
		s.MinKubeletVersion = v
	}
	for i, field := range f.ForbiddenDynamicFields {
		if !kubeletconfig.IsTopLevelField(field) {
			errs = append(errs, fmt.Errorf("forbiddenDynamicFields[%d]: %q is not a top-level KubeletConfiguration field (JSON name, e.g. staticPodPath)", i, field))
		}
	}
	s.ForbiddenDynamicFields = slices.Clone(f.ForbiddenDynamicFields)
	for i, user := range f.ExemptUsers {
		if user == "" {
			errs = append(errs, fmt.Errorf("exemptUsers[%d]: empty user name", i))
		}
		if strings.HasPrefix(user, "system:node:") {
			errs = append(errs, fmt.Errorf("exemptUsers[%d]: nodes cannot be exempt", i))
		}
	}
	s.ExemptUsers = slices.Clone(f.ExemptUsers)
	s.AllocatableFloorPercent = DefaultAllocatableFloorPercent
	if p := f.AllocatableFloorPercent; p != nil {
		if *p < 0 || *p > 100 {
			errs = append(errs, fmt.Errorf("allocatableFloorPercent %d: want 0 (off) to 100", *p))
		}
		s.AllocatableFloorPercent = int(*p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return s, nil
}
