package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// recordName is the file name of a record in the state directory. Only the
// constants below exist, so no record name ever comes from input.
type recordName string

const (
	recordAssigned      recordName = "assigned"
	recordLastKnownGood recordName = "last-known-good"
	recordActive        recordName = "active"
	recordTrial         recordName = "trial"
	recordBad           recordName = "bad"
)

// refRecord is the body of the assigned and last-known-good records. A nil Ref
// means the node's local configuration.
type refRecord struct {
	Ref *contract.ConfigMapVersion `json:"ref"`
}

// Active records what the kubelet was last restarted with.
type Active struct {
	// Ref is nil for the node's local configuration.
	Ref *contract.ConfigMapVersion `json:"ref"`
	// FileSHA256 is the checksum of the kubelet config file as written, or
	// empty when the agent removed it (drop-in mode, local configuration).
	FileSHA256 string    `json:"fileSHA256"`
	AppliedAt  time.Time `json:"appliedAt"`
	// Waived says what a check its trial waived found (the after-drain
	// fit, for an assignment that allowed the change to shrink the Node),
	// for the status to say for as long as it runs.
	Waived string `json:"waived,omitempty"`
}

// Trial records a configuration on trial. Its clock is the time elapsed
// since boot (CLOCK_BOOTTIME), valid only on the boot named by BootID.
type Trial struct {
	Ref    contract.ConfigMapVersion `json:"ref"`
	BootID string                    `json:"bootID"`
	// StartedSinceBoot is when the trial started, as time since boot.
	StartedSinceBoot time.Duration `json:"startedSinceBootNanos"`
	// StartedAt is the wall-clock start, informative only.
	StartedAt time.Time `json:"startedAt"`
	// Terms are the assignment's own terms (contract.TrialAnnotation) as
	// they were when the trial started, nil for the agent's: a trial is
	// judged by the terms it started under, an agent restarted meanwhile
	// included.
	Terms *contract.TrialTerms `json:"terms,omitempty"`
}

// BadEntry is a configuration that failed its trial and must not be applied
// again; a ConfigMap edit gives a new resourceVersion, hence a new chance.
type BadEntry struct {
	Ref     contract.ConfigMapVersion `json:"ref"`
	Reason  string                    `json:"reason"`
	Message string                    `json:"message"`
	At      time.Time                 `json:"at"`
	// PendingPods, for a drain that timed out, are the pods that blocked
	// it ("namespace/name"), reported for as long as the entry stands.
	PendingPods []string `json:"pendingPods,omitempty"`
	// DrainOptions, for a drain that pods blocked, are the switches the
	// Node's assignment gave then: changing them allows the change again.
	DrainOptions *contract.DrainOptions `json:"drainOptions,omitempty"`
}

type badList struct {
	Entries []BadEntry `json:"entries"`
}

// MaxBadEntries bounds the bad list; the oldest entries go first. A config
// dropped from it would only be retried if assigned again unchanged.
const MaxBadEntries = 64

func (s *Store) recordPath(name recordName) string { return filepath.Join(s.dir, string(name)) }

// readRecord returns found == false for a missing record, and an ErrCorrupt
// error (the file moved aside) for one that fails its checks.
func (s *Store) readRecord(name recordName, v any, check func() error) (found bool, err error) {
	err = s.readEnvelope(s.recordPath(name), string(name), v, check)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("record %s: %w", name, err)
	}
	return true, nil
}

func (s *Store) writeRecord(name recordName, v any) error {
	data, err := encodeEnvelope(string(name), v)
	if err != nil {
		return err
	}
	if err := s.writeFile(s.recordPath(name), data); err != nil {
		return fmt.Errorf("writing record %s: %w", name, err)
	}
	return nil
}

// requireCheckpoint enforces that a record only ever points at a durable
// checkpoint.
func (s *Store) requireCheckpoint(name recordName, ref *contract.ConfigMapVersion) error {
	if ref == nil {
		return nil
	}
	if err := ValidateRef(*ref); err != nil {
		return fmt.Errorf("record %s: %w", name, err)
	}
	if !s.HasCheckpoint(*ref) {
		return fmt.Errorf("record %s: refusing to point at %s, which has no checkpoint", name, refString(*ref))
	}
	return nil
}

// The checks below are what a decoded record must also satisfy.

func checkOptionalRef(ref *contract.ConfigMapVersion) error {
	if ref == nil {
		return nil
	}
	return ValidateRef(*ref)
}

func (p refRecord) check() error { return checkOptionalRef(p.Ref) }

func (a Active) check() error { return checkOptionalRef(a.Ref) }

func (t Trial) check() error {
	if err := ValidateRef(t.Ref); err != nil {
		return err
	}
	if t.BootID == "" || t.StartedSinceBoot < 0 {
		return errors.New("trial without a boot ID or with a negative start")
	}
	return t.Terms.Validate()
}

func (l badList) check() error {
	for _, e := range l.Entries {
		if err := ValidateRef(e.Ref); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) readRef(name recordName) (*contract.ConfigMapVersion, error) {
	var p refRecord
	if _, err := s.readRecord(name, &p, func() error { return p.check() }); err != nil {
		return nil, err
	}
	return p.Ref, nil
}

func (s *Store) writeRef(name recordName, ref *contract.ConfigMapVersion) error {
	if err := s.requireCheckpoint(name, ref); err != nil {
		return err
	}
	return s.writeRecord(name, refRecord{Ref: ref})
}

// Assigned returns the assigned record; nil means the local configuration
// (also when the record is missing or corrupt; the error says which).
func (s *Store) Assigned() (*contract.ConfigMapVersion, error) { return s.readRef(recordAssigned) }

// SetAssigned moves the assigned record; ref must have a checkpoint.
func (s *Store) SetAssigned(ref *contract.ConfigMapVersion) error {
	return s.writeRef(recordAssigned, ref)
}

// LastKnownGood returns the last-known-good record; nil means the local
// configuration.
func (s *Store) LastKnownGood() (*contract.ConfigMapVersion, error) {
	return s.readRef(recordLastKnownGood)
}

// SetLastKnownGood moves the last-known-good record; ref must have a
// checkpoint.
func (s *Store) SetLastKnownGood(ref *contract.ConfigMapVersion) error {
	return s.writeRef(recordLastKnownGood, ref)
}

// Active returns what the kubelet was last restarted with, or nil when
// unknown (never recorded, or corrupt).
func (s *Store) Active() (*Active, error) {
	var a Active
	found, err := s.readRecord(recordActive, &a, func() error { return a.check() })
	if err != nil || !found {
		return nil, err
	}
	return &a, nil
}

// SetActive records what the kubelet was restarted with.
func (s *Store) SetActive(a Active) error {
	if err := s.requireCheckpoint(recordActive, a.Ref); err != nil {
		return err
	}
	return s.writeRecord(recordActive, a)
}

// Trial returns the trial in progress, or nil.
func (s *Store) Trial() (*Trial, error) {
	var t Trial
	found, err := s.readRecord(recordTrial, &t, func() error { return t.check() })
	if err != nil || !found {
		return nil, err
	}
	return &t, nil
}

// SetTrial records a trial; its config must have a checkpoint.
func (s *Store) SetTrial(t Trial) error {
	if err := s.requireCheckpoint(recordTrial, &t.Ref); err != nil {
		return err
	}
	if t.BootID == "" {
		return errors.New("record trial: no boot ID")
	}
	return s.writeRecord(recordTrial, t)
}

// ClearTrial removes the trial record.
func (s *Store) ClearTrial() error { return s.removeFile(s.recordPath(recordTrial)) }

// Bad returns the configurations that failed their trial.
func (s *Store) Bad() ([]BadEntry, error) {
	var list badList
	_, err := s.readRecord(recordBad, &list, func() error { return list.check() })
	return list.Entries, err
}

// SetBad replaces the bad list, keeping the newest MaxBadEntries.
func (s *Store) SetBad(entries []BadEntry) error {
	if len(entries) > MaxBadEntries {
		entries = entries[len(entries)-MaxBadEntries:]
	}
	return s.writeRecord(recordBad, badList{Entries: entries})
}
