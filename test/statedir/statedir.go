package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/durable"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/checkpoint"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/statelock"
)

// The layout of a state directory, as pkg/nodeagent/checkpoint's doc.go
// documents it.
const (
	checkpointsDir = "checkpoints"
	corruptDir     = "corrupt"
	checkpointExt  = ".json"
)

// records are the records' file names.
var records = []string{"assigned", "last-known-good", "active", "trial", "drain", "bad", "kubelet-version"}

// CheckpointName is the file name, in checkpoints/, of the checkpoint of
// ref.
func CheckpointName(ref contract.ConfigMapVersion) string {
	return ref.UID + "_" + ref.ResourceVersion + checkpointExt
}

// Inspection is a state directory as Inspect read it.
type Inspection struct {
	// Assigned and LastKnownGood are the refs of those records; nil is the
	// local configuration (also when the record does not exist).
	Assigned, LastKnownGood *contract.ConfigMapVersion
	// Active, Trial and Drain are the records; nil when absent.
	Active *checkpoint.Active
	Trial  *checkpoint.Trial
	Drain  *checkpoint.Drain
	Bad    []checkpoint.BadEntry
	// KubeletVersion is the kubelet version last recorded; "" when none.
	KubeletVersion string
	// Checkpoints are the sound checkpoints, by file name (CheckpointName).
	Checkpoints map[string]checkpoint.Checkpoint
	// Temporary lists the temporary files of writes a crash interrupted
	// (relative paths). They are not state: the agent's Open removes them
	// and no reader ever looks at them.
	Temporary []string
	// Quarantined lists the files in corrupt/, which the agent moved aside.
	Quarantined []string
}

// Inspect reads the state directory dir without changing it. It returns an
// error naming every record or checkpoint the agent's readers would find
// corrupt (and move aside), every file the agent does not write, every
// checkpoint under another name than its configuration's, and every ref
// (assigned, last-known-good, active, trial, drain) without a sound
// checkpoint. A directory it accepts is one the agent takes as is. Errors
// from the readers name the files of the copy they read, which is gone
// when Inspect returns.
func Inspect(dir string) (in Inspection, err error) {
	in = Inspection{Checkpoints: map[string]checkpoint.Checkpoint{}}
	var problems []error
	problem := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	entries, err := os.ReadDir(dir)
	if err != nil {
		return in, fmt.Errorf("inspecting state directory: %w", err)
	}
	copyDir, err := os.MkdirTemp("", "statedir-copy-")
	if err != nil {
		return in, fmt.Errorf("inspecting state directory: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(copyDir)) }()
	if err := os.Mkdir(filepath.Join(copyDir, checkpointsDir), 0o700); err != nil {
		return in, fmt.Errorf("inspecting state directory: %w", err)
	}

	for _, e := range entries {
		name := e.Name()
		switch {
		case isTemp(name) && e.Type().IsRegular():
			in.Temporary = append(in.Temporary, name)
		case e.IsDir() && (name == checkpointsDir || name == corruptDir):
		case e.Type().IsRegular() && name == statelock.FileName:
			// The running agent's lock: an empty file whose content means
			// nothing.
		case e.Type().IsRegular() && slices.Contains(records, name):
			if err := copyFile(filepath.Join(dir, name), filepath.Join(copyDir, name)); err != nil {
				return in, err
			}
		default:
			problem("%s: not a file the agent writes", filepath.Join(dir, name))
		}
	}
	checkpoints, err := os.ReadDir(filepath.Join(dir, checkpointsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		problem("listing checkpoints: %w", err)
	}
	var candidates []string
	for _, e := range checkpoints {
		name, rel := e.Name(), filepath.Join(checkpointsDir, e.Name())
		switch {
		case isTemp(name) && e.Type().IsRegular():
			in.Temporary = append(in.Temporary, rel)
		case !e.Type().IsRegular() || !strings.HasSuffix(name, checkpointExt):
			problem("%s: not a checkpoint", filepath.Join(dir, rel))
		default:
			if err := copyFile(filepath.Join(dir, rel), filepath.Join(copyDir, rel)); err != nil {
				return in, err
			}
			candidates = append(candidates, name)
		}
	}
	corrupt, err := os.ReadDir(filepath.Join(dir, corruptDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		problem("listing %s: %w", corruptDir, err)
	}
	for _, e := range corrupt {
		in.Quarantined = append(in.Quarantined, filepath.Join(corruptDir, e.Name()))
	}
	slices.Sort(in.Temporary)

	store, err := checkpoint.Open(copyDir, checkpoint.Options{})
	if err != nil {
		return in, fmt.Errorf("inspecting state directory: %w", err)
	}
	var errs [7]error
	in.Assigned, errs[0] = store.Assigned()
	in.LastKnownGood, errs[1] = store.LastKnownGood()
	in.Active, errs[2] = store.Active()
	in.Trial, errs[3] = store.Trial()
	in.Drain, errs[4] = store.Drain()
	in.Bad, errs[5] = store.Bad()
	in.KubeletVersion, errs[6] = store.KubeletVersion()
	problems = append(problems, errs[:]...)

	for _, name := range candidates {
		ref, err := claimedRef(filepath.Join(copyDir, checkpointsDir, name))
		if err == nil && CheckpointName(ref) != name {
			err = fmt.Errorf("holds %s/%s (uid %s, resourceVersion %s): wrongly placed", ref.Namespace, ref.Name, ref.UID, ref.ResourceVersion)
		}
		if err != nil {
			problem("checkpoint %s: %w", name, err)
			continue
		}
		cp, err := store.LoadCheckpoint(ref)
		if err != nil {
			problem("checkpoint %s: %w", name, err)
			continue
		}
		in.Checkpoints[name] = cp
	}

	for _, r := range in.refs() {
		if _, ok := in.Checkpoints[CheckpointName(r.ref)]; !ok {
			problem("record %s points at %s/%s (uid %s, resourceVersion %s), which has no sound checkpoint",
				r.record, r.ref.Namespace, r.ref.Name, r.ref.UID, r.ref.ResourceVersion)
		}
	}
	return in, errors.Join(problems...)
}

type namedRef struct {
	record string
	ref    contract.ConfigMapVersion
}

// refs lists every ref a record holds that must resolve to a checkpoint.
// The bad list is not among them: it names configurations without needing
// their content.
func (in Inspection) refs() []namedRef {
	var refs []namedRef
	add := func(record string, ref *contract.ConfigMapVersion) {
		if ref != nil {
			refs = append(refs, namedRef{record, *ref})
		}
	}
	add("assigned", in.Assigned)
	add("last-known-good", in.LastKnownGood)
	if in.Active != nil {
		add("active", in.Active.Ref)
	}
	if in.Trial != nil {
		add("trial", &in.Trial.Ref)
	}
	if in.Drain != nil {
		add("drain", in.Drain.Ref)
	}
	return refs
}

// claimedRef is the configuration a checkpoint file says it holds, read
// without any check: Store.LoadCheckpoint of that ref checks the file.
func claimedRef(path string) (contract.ConfigMapVersion, error) {
	var envelope struct {
		Body struct {
			Ref contract.ConfigMapVersion `json:"ref"`
		} `json:"body"`
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return contract.ConfigMapVersion{}, err
	}
	if err := json.Unmarshal(data, &envelope); err != nil {
		return contract.ConfigMapVersion{}, fmt.Errorf("does not decode: %w", err)
	}
	return envelope.Body.Ref, nil
}

func isTemp(name string) bool { return strings.HasPrefix(name, durable.TempPrefix) }

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("inspecting state directory: %w", err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		return fmt.Errorf("inspecting state directory: %w", err)
	}
	return nil
}
