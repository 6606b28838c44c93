package kubeletconfig

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/lru"
)

// DefaultCheckerEntries is how many outcomes a Checker keeps by default:
// far more distinct configurations than a cluster has pools.
const DefaultCheckerEntries = 64

// maxRememberedBytes is the largest configuration a Checker remembers, so
// that what it holds stays bounded; kubelet configurations take a few KiB,
// and a larger one is decoded each time.
const maxRememberedBytes = 64 << 10

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
// for the last contents it has seen, keyed by the content itself. The same
// text comes back far more often than it changes: an update's old object is
// the previous update's new one, every node assigned a pool brings the
// pool's ConfigMap into its admission, and GitOps controllers re-apply (and
// dry-run) unchanged ConfigMaps; strictly decoding YAML is most of what
// judging such a ConfigMap costs.
type Checker struct {
	outcomes *lru.Cache // content string -> *Checked
}

// NewChecker returns a Checker that keeps the last entries outcomes.
func NewChecker(entries int) *Checker {
	return &Checker{outcomes: lru.New(max(entries, 1))}
}

// Check decodes and validates data, or returns the outcome of the last time
// it did for the same content.
func (c *Checker) Check(data string) *Checked {
	if v, ok := c.outcomes.Get(data); ok {
		return v.(*Checked)
	}
	outcome := &Checked{}
	outcome.Config, outcome.Err = Decode([]byte(data))
	if outcome.Err == nil {
		outcome.Invalid = Validate(outcome.Config)
	}
	if len(data) <= maxRememberedBytes {
		c.outcomes.Add(data, outcome)
	}
	return outcome
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
	return c.Check(data), nil
}
