package contract

// Reasons of the KubeletConfigReady condition (docs/reference.md, The
// KubeletConfigReady condition). The agent also posts each as the reason of
// an Event on its Node: a Normal one for Draining and Restarting, a Warning
// one for each new problem.
const (
	// ReasonConfigActive (True): the assigned ConfigMap is active and passed
	// its trial.
	ReasonConfigActive = "ConfigActive"
	// ReasonLocalConfig (True): nothing is assigned; the node's local
	// configuration is active.
	ReasonLocalConfig = "LocalConfig"

	// ReasonDraining (False): a change that needs a drain is under way: the
	// Node is cordoned and its pods evicted (status.pendingPods names those
	// waited on). The phase PhaseDraining while it lasts.
	ReasonDraining = PhaseDraining
	// ReasonRestarting (False): drained; the kubelet is being restarted with
	// the change (its invalidated state files removed). The phase
	// PhaseRestarting while it lasts.
	ReasonRestarting = PhaseRestarting
	// ReasonTrialInProgress (False): the assigned configuration is active and
	// on trial. The phase PhaseTrialInProgress while it lasts.
	ReasonTrialInProgress = PhaseTrialInProgress

	// ReasonDownloading (False): the assigned ConfigMap has not been read yet
	// (not an error).
	ReasonDownloading = "Downloading"
	// ReasonDownloadFailed (False): the assigned ConfigMap cannot be read:
	// missing, deleted, forbidden.
	ReasonDownloadFailed = "DownloadFailed"
	// ReasonValidationFailed (False): the assigned configuration does not
	// decode, validate, pass the feature-gate check for this kubelet or the
	// webhook's rules the agent applies, render with the node-local fields,
	// or is not labelled eligible; never applied.
	ReasonValidationFailed = "ValidationFailed"
	// ReasonRolledBack (False): the assigned configuration failed its trial
	// (the message names the signal) and was rolled back; not retried until
	// the ConfigMap changes.
	ReasonRolledBack = "RolledBack"
	// ReasonCheckpointCorrupt (False): a checkpoint failed its checksum and
	// was moved aside; downloaded again when possible.
	ReasonCheckpointCorrupt = "CheckpointCorrupt"
	// ReasonApplyFailed (False): writing the kubelet's config file or the
	// state directory, or the kubelet's restart, failed; retried with backoff.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonAssignmentInvalid (False): the ConfigSourceAnnotation does not
	// parse; the current configuration is kept. Also the reason of the
	// Warning Event for a DrainAnnotation value that is not a drain mode.
	ReasonAssignmentInvalid = "AssignmentInvalid"
	// ReasonDrainTimedOut (False): the drain a change needed did not finish
	// within the agent's --drain-timeout; the Node was uncordoned and the
	// change not applied (status.pendingPods names the pods that blocked
	// it); not retried until the ConfigMap changes.
	ReasonDrainTimedOut = "DrainTimedOut"
	// ReasonDrainBlocked (False): the drain a change needed would have
	// deleted pods `kubectl drain` refuses to without being told (a pod no
	// controller recreates, a pod with emptyDir data), and the Node's
	// assignment did not allow it (DrainForceAnnotation,
	// DrainDeleteEmptyDirDataAnnotation): nothing was evicted, the Node was
	// uncordoned and the change not applied (status.pendingPods names the
	// pods); not retried until the ConfigMap or those switches change.
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonConfigDrifted (False): outside a trial, the kubelet no longer
	// runs the configuration the agent applied and verified: a field it
	// set runs with another value (status.running names the field, both
	// values and what set it). The agent restores a file it owns; drift it
	// does not own (a flag, another drop-in, a kubelet started with other
	// files) is reported, not fought.
	ReasonConfigDrifted = "ConfigDrifted"
	// ReasonConfigUnverified (False): the kubelet's running configuration
	// cannot be read (its /configz: authorization refused, the endpoint
	// disabled, the kubelet not answering), so the agent cannot say that
	// the kubelet runs what it applied: outside a trial, or at the end of
	// one, which does not pass until it can.
	ReasonConfigUnverified = "ConfigUnverified"
)

// Reasons of the agent's Events on its Node for transitions that are not a
// condition reason (docs/reference.md, The KubeletConfigReady condition).
const (
	// EventConfigApplied (Normal): the kubelet was restarted with a new
	// configuration; posted for each restart.
	EventConfigApplied = "KubeletConfigApplied"
	// EventTrialPassed (Normal): the active configuration passed its trial
	// and is now last-known-good.
	EventTrialPassed = "KubeletConfigTrialPassed"
	// EventUncordoned (Normal): the agent removed the cordon it set for a
	// change (see CordonedAnnotation).
	EventUncordoned = "Uncordoned"
)
