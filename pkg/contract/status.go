package contract

import "encoding/json"

// ConfigMapVersion pins one version of a ConfigMap (the contract's REF). A
// nil *ConfigMapVersion in a ConfigStatus means the node's local
// configuration.
type ConfigMapVersion struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// SameVersion reports whether a and b pin the same version of the same
// ConfigMap; two nils are the same local configuration.
func SameVersion(a, b *ConfigMapVersion) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ConfigStatus is the JSON document the agent writes into
// ConfigStatusAnnotation.
type ConfigStatus struct {
	Assigned      *ConfigMapVersion `json:"assigned"`
	Active        *ConfigMapVersion `json:"active"`
	LastKnownGood *ConfigMapVersion `json:"lastKnownGood"`
	Error         string            `json:"error"`
	// Phase is where a change stands while one is under way (PhaseDraining,
	// PhaseRestarting, PhaseTrialInProgress); empty otherwise.
	Phase string `json:"phase,omitempty"`
	// PendingPods are the pods ("namespace/name") a drain still waits on:
	// evictions refused by a PodDisruptionBudget, or pods still
	// terminating; in a drain that timed out, the pods that blocked it.
	PendingPods []string `json:"pendingPods,omitempty"`
	// Waived says which check of the active configuration's trial was
	// waived, because its assignment allowed the change to shrink what
	// the Node holds (TrialTerms.AllowShrink), and what the check found;
	// empty when none was.
	Waived string `json:"waived,omitempty"`
	// Running is what the agent last read of the kubelet's running
	// configuration (its /configz), compared with the configuration it
	// applied; nil while it has nothing to compare (the local
	// configuration, or nothing read yet).
	Running *RunningConfig `json:"running,omitempty"`
}

// ParseConfigStatus decodes the text of a ConfigStatusAnnotation.
func ParseConfigStatus(raw string) (*ConfigStatus, error) {
	var status ConfigStatus
	if err := json.Unmarshal([]byte(raw), &status); err != nil {
		return nil, err
	}
	return &status, nil
}

// RunningConfig is how the kubelet's running configuration compares with
// the configuration the agent applied: every field that configuration sets.
type RunningConfig struct {
	// State is RunningMatches, RunningDiffers or RunningUnknown.
	State string `json:"state"`
	// Differences are the fields that run with another value
	// (RunningDiffers), in field order.
	Differences []FieldDifference `json:"differences,omitempty"`
	// Error says why the running configuration could not be read
	// (RunningUnknown).
	Error string `json:"error,omitempty"`
}

// FieldDifference is one field the kubelet runs with another value than the
// configuration set.
type FieldDifference struct {
	// Field is the field's path: maxPods, evictionHard[memory.available].
	Field string `json:"field"`
	// Asked and Running are the two values, JSON ("unset" when the
	// kubelet runs the field unset).
	Asked   string `json:"asked"`
	Running string `json:"running"`
	// Source says what set the running value, where the agent can tell: a
	// flag on the kubelet's command line, a drop-in merged after the
	// agent's file, the agent's file changed behind its back.
	Source string `json:"source,omitempty"`
}

// States of RunningConfig.
const (
	// RunningMatches: every field the configuration sets runs as set.
	RunningMatches = "Matches"
	// RunningDiffers: some field runs with another value.
	RunningDiffers = "Differs"
	// RunningUnknown: the running configuration could not be read.
	RunningUnknown = "Unknown"
)
