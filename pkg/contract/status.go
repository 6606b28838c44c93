package contract

// ObjectRef pins one version of a ConfigMap. A nil *ObjectRef in a
// ConfigStatus means the node's local configuration.
type ObjectRef struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// ConfigStatus is the JSON document the agent writes into
// ConfigStatusAnnotation.
type ConfigStatus struct {
	Assigned      *ObjectRef `json:"assigned"`
	Active        *ObjectRef `json:"active"`
	LastKnownGood *ObjectRef `json:"lastKnownGood"`
	Error         string     `json:"error"`
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
}
