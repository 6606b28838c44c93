package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
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
// for content it has seen. Content is found by a seeded hash and compared
// in full, so that no crafted content can take another's outcome; SHA-256
// of 4 KiB cost as much as the rest of a ConfigMap's rules.
//
// The same text comes back far more often than it changes: an update's old
// object is the previous update's new one, every node assigned a pool
// brings the pool's ConfigMap into its admission, and GitOps controllers
// re-apply (and dry-run) unchanged ConfigMaps on every sync. Strictly
// decoding YAML costs about half a millisecond; a repeat costs a hash.
type Checker struct {
	seed     maphash.Seed
	outcomes *lru.Cache // checkerKey -> checkerEntry
}

// checkerKey finds content by its hash, and by whether that is the content
// itself or a JSON string literal holding it: the literal "\"x\"" and the
// content "x" must never share an outcome.
type checkerKey struct {
	quoted bool
	sum    uint64
}

// checkerEntry is an outcome with a copy of the text it is for.
type checkerEntry struct {
	text    string
	outcome *Checked
}

// errNotQuoted is CheckQuoted's error for text that is not one JSON string.
var errNotQuoted = errors.New("not a JSON string")

// NewChecker returns a Checker that keeps the last entries outcomes.
func NewChecker(entries int) *Checker {
	return &Checker{seed: maphash.MakeSeed(), outcomes: lru.New(max(entries, 1))}
}

// Check decodes and validates data, or returns the outcome of the last time
// it did for the same content.
func (c *Checker) Check(data []byte) *Checked {
	key := checkerKey{sum: maphash.Bytes(c.seed, data)}
	if outcome, ok := c.lookup(key, unsafe.String(unsafe.SliceData(data), len(data))); ok {
		return outcome
	}
	return c.checkAndAdd(key, string(data), data)
}

// lookup returns the outcome remembered for text under key, if any.
func (c *Checker) lookup(key checkerKey, text string) (*Checked, bool) {
	v, ok := c.outcomes.Get(key)
	if !ok {
		return nil, false
	}
	entry := v.(checkerEntry)
	if entry.text != text {
		// Another text with the same hash: decoded anew, and it takes
		// the slot.
		return nil, false
	}
	return entry.outcome, true
}

// CheckQuoted checks the configuration written as the JSON string literal
// quoted (quotes and escapes included), as an AdmissionReview carries a
// ConfigMap's data. A repeat costs a hash of the literal: unquoting 4 KiB
// of escaped YAML on every review cost more than the rest of the rules.
// The literal is unquoted as encoding/json unquotes it, and only when its
// outcome is not known; the error is for text that is not one JSON string.
func (c *Checker) CheckQuoted(quoted string) (*Checked, error) {
	key := checkerKey{quoted: true, sum: maphash.String(c.seed, quoted)}
	if outcome, ok := c.lookup(key, quoted); ok {
		return outcome, nil
	}
	var data string
	if len(quoted) == 0 || quoted[0] != '"' {
		return nil, errNotQuoted
	}
	if err := json.Unmarshal(stringBytes(quoted), &data); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotQuoted, err)
	}
	return c.checkAndAdd(key, strings.Clone(quoted), stringBytes(data)), nil
}

// checkAndAdd decodes and validates data, remembering the outcome under
// key for text, a copy the caller made, detached from the request body.
func (c *Checker) checkAndAdd(key checkerKey, text string, data []byte) *Checked {
	outcome := &Checked{}
	outcome.Config, outcome.Err = Decode(data)
	if outcome.Err == nil {
		outcome.Invalid = Validate(outcome.Config)
	}
	c.outcomes.Add(key, checkerEntry{text: text, outcome: outcome})
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
