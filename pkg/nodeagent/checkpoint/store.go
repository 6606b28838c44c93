package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/durable"
)

const (
	checkpointsDirName = "checkpoints"
	checkpointKind     = "Checkpoint"
	checkpointSuffix   = ".json"
)

// Options tune a Store.
type Options struct {
	// Failpoint, when set, is called between the steps of every write and
	// removal; an error stops the operation there (see
	// durable.ErrSimulatedCrash). Tests only.
	Failpoint durable.Failpoint
	// Now stamps moved-aside files; nil means time.Now.
	Now func() time.Time
}

// Store is a state directory. It is not safe for concurrent use: the agent
// has a single worker.
type Store struct {
	dir       string
	failpoint durable.Failpoint
	now       func() time.Time
}

// Open prepares dir (creating it with mode 0700 if needed) and removes the
// temporary files a crash may have left.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("state directory: no path given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	s := &Store{dir: abs, failpoint: opts.Failpoint, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	for _, d := range []string{s.dir, s.checkpointsDir(), filepath.Join(s.dir, corruptDirName)} {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
		if err := removeStaleTemps(d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Dir is the state directory's absolute path.
func (s *Store) Dir() string { return s.dir }

func (s *Store) checkpointsDir() string { return filepath.Join(s.dir, checkpointsDirName) }

// Checkpoint is one downloaded configuration.
type Checkpoint struct {
	Ref contract.ConfigMapVersion `json:"ref"`
	// Key is the ConfigMap data key the configuration was read from.
	Key string `json:"key"`
	// HasKey is false when the ConfigMap had no such key; Config is then
	// empty and the checkpoint records only that the download was complete.
	HasKey bool   `json:"hasKey"`
	Config string `json:"config"`
	// DownloadedAt is informative only.
	DownloadedAt time.Time `json:"downloadedAt"`
}

// UIDs are UUIDs and resourceVersions are decimal numbers in practice; both
// are opaque by contract, so accept a wider but still path-safe alphabet.
var (
	uidPattern             = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	resourceVersionPattern = regexp.MustCompile(`^[A-Za-z0-9]{1,64}$`)
)

// ValidateRef checks that a reference is complete and safe to name a file.
func ValidateRef(ref contract.ConfigMapVersion) error {
	var problems []string
	if msgs := validation.IsDNS1123Label(ref.Namespace); len(msgs) > 0 {
		problems = append(problems, "namespace: "+strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(ref.Name); len(msgs) > 0 {
		problems = append(problems, "name: "+strings.Join(msgs, "; "))
	}
	if !uidPattern.MatchString(ref.UID) {
		problems = append(problems, fmt.Sprintf("uid %q: want letters, digits and dashes", ref.UID))
	}
	if !resourceVersionPattern.MatchString(ref.ResourceVersion) {
		problems = append(problems, fmt.Sprintf("resourceVersion %q: want letters and digits", ref.ResourceVersion))
	}
	if len(problems) > 0 {
		return fmt.Errorf("reference %s/%s: %s", ref.Namespace, ref.Name, strings.Join(problems, ", "))
	}
	return nil
}

func checkpointFileName(ref contract.ConfigMapVersion) string {
	return ref.UID + "_" + ref.ResourceVersion + checkpointSuffix
}

func (s *Store) checkpointPath(ref contract.ConfigMapVersion) (string, error) {
	if err := ValidateRef(ref); err != nil {
		return "", err
	}
	return filepath.Join(s.checkpointsDir(), checkpointFileName(ref)), nil
}

// SaveCheckpoint writes a checkpoint durably. Saving one that exists replaces
// it, which is harmless: the same UID and resourceVersion mean the same data.
func (s *Store) SaveCheckpoint(cp Checkpoint) error {
	path, err := s.checkpointPath(cp.Ref)
	if err != nil {
		return fmt.Errorf("saving checkpoint: %w", err)
	}
	if !cp.HasKey && cp.Config != "" {
		return errors.New("saving checkpoint: a checkpoint without its key cannot carry a config")
	}
	data, err := encodeEnvelope(checkpointKind, cp)
	if err != nil {
		return err
	}
	if err := s.writeFile(path, data); err != nil {
		return fmt.Errorf("saving checkpoint %s: %w", refString(cp.Ref), err)
	}
	return nil
}

// LoadCheckpoint reads and checks a checkpoint. It returns ErrNotFound, or
// ErrCorrupt after moving a bad file aside.
func (s *Store) LoadCheckpoint(ref contract.ConfigMapVersion) (Checkpoint, error) {
	path, err := s.checkpointPath(ref)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("loading checkpoint: %w", err)
	}
	var cp Checkpoint
	err = s.readEnvelope(path, checkpointKind, &cp, func() error {
		if err := cp.checkNamed(checkpointFileName(ref)); err != nil {
			return err
		}
		// Same UID and resourceVersion but another name: a file edited by
		// hand, never one the agent wrote.
		if cp.Ref != ref {
			return fmt.Errorf("holds %s, not %s: wrongly placed", refString(cp.Ref), refString(ref))
		}
		return nil
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", refString(ref), err)
	}
	return cp, nil
}

// checkNamed checks a decoded checkpoint found under the file name name.
func (cp Checkpoint) checkNamed(name string) error {
	if err := ValidateRef(cp.Ref); err != nil {
		return err
	}
	if checkpointFileName(cp.Ref) != name {
		return fmt.Errorf("holds %s, not what %s names: wrongly placed", refString(cp.Ref), name)
	}
	if !cp.HasKey && cp.Config != "" {
		return errors.New("carries a config but says its key was missing")
	}
	return nil
}

// HasCheckpoint reports whether a checkpoint file exists, without checking
// its content.
func (s *Store) HasCheckpoint(ref contract.ConfigMapVersion) bool {
	path, err := s.checkpointPath(ref)
	if err != nil {
		return false
	}
	info, err := os.Lstat(path)
	return err == nil && info.Mode().IsRegular()
}

// PruneCheckpoints removes every checkpoint file not in keep, and moves
// aside anything else found in the checkpoints directory.
func (s *Store) PruneCheckpoints(keep []contract.ConfigMapVersion) error {
	entries, err := os.ReadDir(s.checkpointsDir())
	if err != nil {
		return fmt.Errorf("listing checkpoints: %w", err)
	}
	wanted := make([]string, 0, len(keep))
	for _, ref := range keep {
		wanted = append(wanted, checkpointFileName(ref))
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(s.checkpointsDir(), name)
		switch {
		case isTemp(name):
			// A write in progress cannot exist here (single worker); leave
			// stale ones to Open.
		case !e.Type().IsRegular() || !strings.HasSuffix(name, checkpointSuffix):
			if _, err := s.quarantine(path); err != nil {
				errs = append(errs, err)
			}
		case !slices.Contains(wanted, name):
			if err := s.removeFile(path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func refString(ref contract.ConfigMapVersion) string {
	return fmt.Sprintf("%s/%s (uid %s, resourceVersion %s)", ref.Namespace, ref.Name, ref.UID, ref.ResourceVersion)
}
