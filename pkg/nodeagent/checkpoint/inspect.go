package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/statelock"
)

// Inspection is a state directory as read, without changing it, by Inspect.
type Inspection struct {
	// Assigned and LastKnownGood are the refs of those records; nil is the local
	// configuration (also when the record does not exist).
	Assigned, LastKnownGood *contract.ConfigMapVersion
	// Active, Trial, Drain and Bad are the records; nil when absent.
	Active *Active
	Trial  *Trial
	Drain  *Drain
	Bad    []BadEntry
	// KubeletVersion is the kubelet version last recorded; "" when none.
	KubeletVersion string
	// Checkpoints are the sound checkpoints, by file name.
	Checkpoints map[string]Checkpoint
	// Temporary lists the temporary files of writes a crash interrupted
	// (relative paths). They are not state: Open removes them and no reader
	// ever looks at them.
	Temporary []string
	// Quarantined lists the files in corrupt/.
	Quarantined []string
}

// Inspect reads the state directory dir as a starting agent would, but
// without changing anything: a file that fails its checks is reported, not
// moved aside, and temporary files are listed, not removed. It returns an
// error naming every record or checkpoint that does not decode, fails its
// checksum or is wrongly placed, every file the store would not have
// written, and every ref (assigned, last-known-good, active, trial,
// drain) whose checkpoint is missing. It is meant for tests and
// post-mortems: a directory it accepts is one Open and the readers take as
// is.
func Inspect(dir string) (Inspection, error) {
	in := Inspection{Checkpoints: map[string]Checkpoint{}}
	var problems []error
	problem := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf(format, args...))
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		return in, fmt.Errorf("inspecting state directory: %w", err)
	}
	records := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case isTemp(name) && e.Type().IsRegular():
			in.Temporary = append(in.Temporary, name)
		case e.IsDir() && (name == checkpointsDirName || name == corruptDirName):
		case e.Type().IsRegular() && name == statelock.FileName:
			// The running agent's lock: an empty file whose content means
			// nothing.
		case e.Type().IsRegular() && isRecordName(name):
			records[name] = true
		default:
			problem("%s: not a file the agent writes", filepath.Join(dir, name))
		}
	}

	readRecord := func(name recordName, v any, check func() error) bool {
		if !records[string(name)] {
			return false
		}
		path := filepath.Join(dir, string(name))
		if err := inspectFile(path, string(name), v, check); err != nil {
			problem("record %s: %w", name, err)
			return false
		}
		return true
	}
	var p refRecord
	if readRecord(recordAssigned, &p, func() error { return p.check() }) {
		in.Assigned = p.Ref
	}
	p = refRecord{}
	if readRecord(recordLastKnownGood, &p, func() error { return p.check() }) {
		in.LastKnownGood = p.Ref
	}
	var active Active
	if readRecord(recordActive, &active, func() error { return active.check() }) {
		in.Active = &active
	}
	var trial Trial
	if readRecord(recordTrial, &trial, func() error { return trial.check() }) {
		in.Trial = &trial
	}
	var drain Drain
	if readRecord(recordDrain, &drain, func() error { return drain.check() }) {
		in.Drain = &drain
	}
	var bad badList
	if readRecord(recordBad, &bad, func() error { return bad.check() }) {
		in.Bad = bad.Entries
	}
	var kubeletVersion kubeletVersionRecord
	if readRecord(recordKubeletVersion, &kubeletVersion, func() error { return kubeletVersion.check() }) {
		in.KubeletVersion = kubeletVersion.Version
	}

	checkpointsDir := filepath.Join(dir, checkpointsDirName)
	entries, err = os.ReadDir(checkpointsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		problem("listing checkpoints: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(checkpointsDir, name)
		switch {
		case isTemp(name) && e.Type().IsRegular():
			in.Temporary = append(in.Temporary, filepath.Join(checkpointsDirName, name))
			continue
		case !e.Type().IsRegular() || !strings.HasSuffix(name, checkpointSuffix):
			problem("%s: not a checkpoint", path)
			continue
		}
		var cp Checkpoint
		if err := inspectFile(path, checkpointKind, &cp, func() error { return cp.checkNamed(name) }); err != nil {
			problem("checkpoint %s: %w", name, err)
			continue
		}
		in.Checkpoints[name] = cp
	}

	corrupt, err := os.ReadDir(filepath.Join(dir, corruptDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		problem("listing %s: %w", corruptDirName, err)
	}
	for _, e := range corrupt {
		in.Quarantined = append(in.Quarantined, filepath.Join(corruptDirName, e.Name()))
	}

	for _, ref := range in.refs() {
		if _, ok := in.Checkpoints[checkpointFileName(ref.ref)]; !ok {
			problem("record %s points at %s, which has no sound checkpoint", ref.record, refString(ref.ref))
		}
	}
	slices.Sort(in.Temporary)
	return in, errors.Join(problems...)
}

type namedRef struct {
	record recordName
	ref    contract.ConfigMapVersion
}

// refs lists every ref a record holds that must resolve to a
// checkpoint. The bad list is not among them: it names configurations
// without needing their content.
func (in Inspection) refs() []namedRef {
	var refs []namedRef
	add := func(name recordName, ref *contract.ConfigMapVersion) {
		if ref != nil {
			refs = append(refs, namedRef{name, *ref})
		}
	}
	add(recordAssigned, in.Assigned)
	add(recordLastKnownGood, in.LastKnownGood)
	if in.Active != nil {
		add(recordActive, in.Active.Ref)
	}
	if in.Trial != nil {
		add(recordTrial, &in.Trial.Ref)
	}
	if in.Drain != nil {
		add(recordDrain, in.Drain.Ref)
	}
	return refs
}

func isRecordName(name string) bool {
	switch recordName(name) {
	case recordAssigned, recordLastKnownGood, recordActive, recordTrial, recordDrain, recordBad, recordKubeletVersion:
		return true
	}
	return false
}

// inspectFile reads and checks one file, changing nothing: readEnvelope
// without the quarantine. check may be nil.
func inspectFile(path, kind string, v any, check func() error) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	if err := decodeEnvelope(data, kind, v); err != nil {
		return err
	}
	if check == nil {
		return nil
	}
	return check()
}
