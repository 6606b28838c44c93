package checkpoint

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// recordKubeletVersion remembers the kubelet version the Node last reported,
// so that an agent starting while the apiserver is away can still check an
// assigned configuration's feature gates instead of refusing it.
const recordKubeletVersion recordName = "kubelet-version"

type kubeletVersionRecord struct {
	Version string `json:"version"`
}

// check refuses a record its user could not use: one that does not parse
// is reported and moved aside like any corrupt record, instead of quietly
// turning off the offline feature-gate check.
func (r kubeletVersionRecord) check() error {
	if r.Version == "" {
		return errors.New("empty kubelet version")
	}
	if _, err := version.ParseGeneric(r.Version); err != nil {
		return fmt.Errorf("kubelet version %q: %w", r.Version, err)
	}
	return nil
}

// KubeletVersion returns the kubelet version last recorded, or "" when none
// was (or the record is corrupt; the error says so).
func (s *Store) KubeletVersion() (string, error) {
	var r kubeletVersionRecord
	found, err := s.readRecord(recordKubeletVersion, &r, func() error { return r.check() })
	if err != nil || !found {
		return "", err
	}
	return r.Version, nil
}

// SetKubeletVersion records the kubelet's version.
func (s *Store) SetKubeletVersion(v string) error {
	r := kubeletVersionRecord{Version: v}
	if err := r.check(); err != nil {
		return err
	}
	return s.writeRecord(recordKubeletVersion, r)
}
