package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// recordDrain holds the drain in progress.
const recordDrain recordName = "drain"

// Drain records a change that needs the Node drained: the cordon it holds
// and what the restart must remove. It lives from the decision to drain
// until the change has passed its trial, or the configuration is running
// without a trial (a rollback), or the drain timed out; while it exists
// the agent keeps its Node cordoned, and once it is gone the agent removes
// its cordon. Keeping the plan here, rather than deciding it again, means
// an agent killed after writing the kubelet's file but before restarting
// still removes the state files: by then the file no longer differs from
// the configuration being applied.
type Drain struct {
	// Ref is the configuration being applied; nil for the local one.
	Ref *contract.ConfigMapVersion `json:"ref"`
	// FileSHA256 is the checksum of the kubelet file being applied, as
	// Active records it.
	FileSHA256 string `json:"fileSHA256"`
	// StateFiles are the kubelet's state files to remove while it is
	// stopped (names in its root directory, from
	// pkg/kubeletconfig/disruption's fixed list).
	StateFiles []string `json:"stateFiles,omitempty"`
	// Reasons say why the change needs the drain, for status and events.
	Reasons []string `json:"reasons,omitempty"`
	// Held are the pods the Node ran when the drain began, before anything
	// was evicted (nil until they were listed): after the restart the trial
	// judges whether the Node can take them back. Kept across an agent's
	// restart and a reboot, since by then they are gone from the Node.
	Held *Held `json:"held,omitempty"`
	// Drained is set once no pod that must leave is left: the restart is
	// next.
	Drained bool `json:"drained"`
	// BootID and StartedSinceBoot time the drain, as Trial does.
	BootID           string        `json:"bootID"`
	StartedSinceBoot time.Duration `json:"startedSinceBootNanos"`
	StartedAt        time.Time     `json:"startedAt"`
}

// Held are the pods a Node ran before its drain.
type Held struct {
	// Pods are the pods bound to the Node that were not over: those the
	// drain evicts and those that stay (DaemonSet and mirror pods).
	Pods []HeldPod `json:"pods"`
	// At is when they were listed, informative only.
	At time.Time `json:"at"`
}

// HeldPod is one of them, with what it requests as the scheduler counts
// it (pkg/podfit).
type HeldPod struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Requests  corev1.ResourceList `json:"requests,omitempty"`
}

// Requests lists what each held pod requests, for pkg/podfit.
func (h *Held) Requests() []corev1.ResourceList {
	out := make([]corev1.ResourceList, len(h.Pods))
	for i, p := range h.Pods {
		out[i] = p.Requests
	}
	return out
}

func (d Drain) check() error {
	if err := checkOptionalRef(d.Ref); err != nil {
		return err
	}
	if d.BootID == "" || d.StartedSinceBoot < 0 {
		return errors.New("drain without a boot ID or with a negative start")
	}
	if d.Held != nil {
		for _, p := range d.Held.Pods {
			for _, q := range p.Requests {
				if q.Sign() < 0 {
					return fmt.Errorf("drain holds pod %s/%s with a negative request", p.Namespace, p.Name)
				}
			}
		}
	}
	for _, name := range d.StateFiles {
		if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("drain names state file %q, which is not a plain file name", name)
		}
	}
	return nil
}

// Drain returns the drain in progress, or nil.
func (s *Store) Drain() (*Drain, error) {
	var d Drain
	found, err := s.readRecord(recordDrain, &d, func() error { return d.check() })
	if err != nil || !found {
		return nil, err
	}
	return &d, nil
}

// SetDrain records a drain; its configuration must have a checkpoint.
func (s *Store) SetDrain(d Drain) error {
	if err := s.requireCheckpoint(recordDrain, d.Ref); err != nil {
		return err
	}
	if err := d.check(); err != nil {
		return fmt.Errorf("record drain: %w", err)
	}
	return s.writeRecord(recordDrain, d)
}

// ClearDrain removes the drain record.
func (s *Store) ClearDrain() error { return s.removeFile(s.recordPath(recordDrain)) }
