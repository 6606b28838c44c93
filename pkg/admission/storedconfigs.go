package admission

import (
	"k8s.io/apimachinery/pkg/runtime"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/internal/bytememo"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// storedConfigEntries bounds the stored ConfigMaps remembered: a cluster
// has a few kubelet pools, and a GitOps controller re-applies each one.
const storedConfigEntries = 256

// maxStoredConfigBytes is the largest ConfigMap remembered, so that the
// memory held stays under storedConfigEntries times this (4 MiB); kubelet
// configurations take a few KiB, and a larger ConfigMap is decoded each
// time, as it would be without the memo.
const maxStoredConfigBytes = 16 << 10

// storedConfigDoorkeeperSlots is how many once-seen ConfigMaps are kept in
// mind (8 bytes each) until a second sighting.
const storedConfigDoorkeeperSlots = 1024

// storedConfigs remembers, by its exact JSON, which configuration a
// ConfigMap as stored holds (the old object of an update). The stored
// object comes back unchanged with every update and server-side dry run
// until one of them lands, and only its configuration is read; finding it
// again, walking past the metadata and re-reading 4 KiB of data, cost more
// than the policies' whole evaluation. A hit costs a hash and a comparison
// of the object.
//
// An object is remembered on its second sighting only, with a copy of its
// JSON detached from the review's body, and compared in full on lookup
// (internal/bytememo).
type storedConfigs struct {
	// checker decodes what is not remembered.
	checker *kubeletconfig.Checker
	configs *bytememo.Memo[*kubeletconfigv1beta1.KubeletConfiguration]
}

func newStoredConfigs(checker *kubeletconfig.Checker) *storedConfigs {
	return &storedConfigs{checker: checker, configs: bytememo.New[*kubeletconfigv1beta1.KubeletConfiguration](storedConfigEntries, storedConfigDoorkeeperSlots)}
}

// configOf returns the configuration of the eligible ConfigMap that raw,
// an update's old object, holds: nil when it is not eligible or its
// configuration does not decode (it may predate the webhook). The error is
// for an object that is not a ConfigMap; errors are never remembered.
func (s *storedConfigs) configOf(raw []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	if len(raw) > maxStoredConfigBytes {
		return s.decode(raw)
	}
	sum := s.configs.Sum(raw)
	if cfg, ok := s.configs.Get(raw, sum); ok {
		return cfg, nil
	}
	cfg, err := s.decode(raw)
	if err == nil {
		s.configs.Put(raw, sum, cfg)
	}
	return cfg, err
}

func (s *storedConfigs) decode(raw []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	cm, err := decodeConfigMap(runtime.RawExtension{Raw: raw}, "oldObject")
	if err != nil {
		return nil, err
	}
	return eligibleKubeletConfig(s.checker, cm), nil
}
