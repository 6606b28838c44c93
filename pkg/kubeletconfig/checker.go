package kubeletconfig

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/lru"
)

// DefaultCheckerEntries is how many outcomes a Checker keeps by default:
// far more distinct configurations than a cluster has pools, at a few
// kilobytes each.
const DefaultCheckerEntries = 64

// Checked is the outcome of decoding and validating one configuration.
// It is shared by everyone who checks the same content: read it, never
// modify it (copy Config with DeepCopy first).
type Checked struct {
	// Config is the decoded configuration; nil when Err is set.
	Config *kubeletconfigv1beta1.KubeletConfiguration
	// Err is Decode's error.
	Err error
	// Invalid is Validate's verdict on Config.
	Invalid field.ErrorList
}

// Checker decodes and validates configurations, remembering the outcome
// for content it has seen, by SHA-256 of the content.
//
// The same text comes back far more often than it changes: an update's old
// object is the previous update's new one, every node assigned a pool
// brings the pool's ConfigMap into its admission, and GitOps controllers
// re-apply (and dry-run) unchanged ConfigMaps on every sync. Strictly
// decoding YAML costs about half a millisecond; a repeat costs a hash.
type Checker struct {
	outcomes *lru.Cache
}

// checkerKey names content by its SHA-256, and by whether that is the
// content itself or a JSON string literal holding it: the literal
// "\"x\"" and the content "x" must never share an outcome.
type checkerKey struct {
	quoted bool
	sum    [sha256.Size]byte
}

// errNotQuoted is CheckQuoted's error for text that is not one JSON string.
var errNotQuoted = errors.New("not a JSON string")

// NewChecker returns a Checker that keeps the last entries outcomes.
func NewChecker(entries int) *Checker {
	return &Checker{outcomes: lru.New(max(entries, 1))}
}

// Check decodes and validates data, or returns the outcome of the last time
// it did for the same content.
func (c *Checker) Check(data []byte) *Checked {
	key := checkerKey{sum: sha256.Sum256(data)}
	if outcome, ok := c.outcomes.Get(key); ok {
		return outcome.(*Checked)
	}
	return c.checkAndAdd(key, data)
}

// CheckQuoted checks the configuration written as the JSON string literal
// quoted (quotes and escapes included), as an AdmissionReview carries a
// ConfigMap's data. A repeat costs a hash of the literal: unquoting 4 KiB
// of escaped YAML on every review cost more than the rest of the rules.
// The literal is unquoted as encoding/json unquotes it, and only when its
// outcome is not known; the error is for text that is not one JSON string.
func (c *Checker) CheckQuoted(quoted string) (*Checked, error) {
	key := checkerKey{quoted: true, sum: sha256.Sum256(stringBytes(quoted))}
	if outcome, ok := c.outcomes.Get(key); ok {
		return outcome.(*Checked), nil
	}
	var data string
	if len(quoted) == 0 || quoted[0] != '"' {
		return nil, errNotQuoted
	}
	if err := json.Unmarshal(stringBytes(quoted), &data); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotQuoted, err)
	}
	return c.checkAndAdd(key, stringBytes(data)), nil
}

func (c *Checker) checkAndAdd(key checkerKey, data []byte) *Checked {
	outcome := &Checked{}
	outcome.Config, outcome.Err = Decode(data)
	if outcome.Err == nil {
		outcome.Invalid = Validate(outcome.Config)
	}
	c.outcomes.Add(key, outcome)
	return outcome
}

// stringBytes views s as bytes without copying it, for readers that never
// write to their input (hashing, unquoting, Decode).
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// CheckConfigMapKey checks the configuration a ConfigMap holds under key,
// as DecodeConfigMapKey decodes it. The error is about the ConfigMap (no
// such key); the outcome's Err, about the content, does not name the
// ConfigMap: wrap it with ConfigMapError, since the same content may live
// in several ConfigMaps.
func (c *Checker) CheckConfigMapKey(cm *corev1.ConfigMap, key string) (*Checked, error) {
	data, err := configMapData(cm, key)
	if err != nil {
		return nil, err
	}
	return c.Check(stringBytes(data)), nil
}
