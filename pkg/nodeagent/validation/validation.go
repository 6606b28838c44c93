package validation

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// ErrUnknownKubeletVersion is returned when the feature gates cannot be
// checked because the kubelet's version is not known yet.
var ErrUnknownKubeletVersion = errors.New("the kubelet's version is not known yet (no Node status and no --kubelet-version)")

// Validator checks configurations.
type Validator struct{}

// Validate decodes config strictly and checks it, including its feature
// gates against kubeletVersion.
func (Validator) Validate(config []byte, kubeletVersion *version.Version) error {
	cfg, err := kubeletconfig.Decode(config)
	if err != nil {
		return err
	}
	if errs := kubeletconfig.Validate(cfg); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if kubeletVersion == nil {
		return ErrUnknownKubeletVersion
	}
	if errs := kubeletconfig.CheckFeatureGates(cfg, kubeletVersion); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// ValidateRendered checks the file about to be written, after the node-local
// fields were applied: a node-local value must not make it invalid.
func (Validator) ValidateRendered(data []byte) error {
	cfg, err := kubeletconfig.Decode(data)
	if err != nil {
		return fmt.Errorf("after applying the node-local fields: %w", err)
	}
	if errs := kubeletconfig.Validate(cfg); len(errs) > 0 {
		return fmt.Errorf("after applying the node-local fields: %w", errs.ToAggregate())
	}
	return nil
}
