package policy

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// configDocCache keeps the rendering of each KubeletConfiguration handed to
// the engine, under each projection it was rendered for. The admission
// webhook decodes each distinct configuration once and hands out the same
// value for every review carrying the same content (kubeletconfig.Checker),
// and rendering one (encoding it to JSON, then decoding the parts policies
// read) cost more than the evaluation. It relies, as the checker does, on
// decoded configurations never being modified. Entries hold their
// configuration weakly and go when it is collected. The rendered documents
// are shared by concurrent evaluations, which only read them (ast.LazyObject
// converts without writing to the document it wraps).
type configDocCache struct {
	entries sync.Map // configKey -> *configDoc
	// lastID numbers the renderings.
	lastID atomic.Uint64
}

// configDoc is one rendering. Its ID identifies the rendering for
// verdictMemo, which then need not encode the whole configuration: a
// configDoc is never changed once stored, and no two renderings of one
// cache share an ID (an address could be reused once one is collected).
type configDoc struct {
	id         uint64
	projection *projection
	doc        any
}

// configKey is a configuration under one projection: the same decoded
// configuration is often both kubeletConfig and oldKubeletConfig (a
// re-apply), which a set may read differently.
type configKey struct {
	config     weak.Pointer[kubeletconfigv1beta1.KubeletConfiguration]
	projection *projection
}

// doc returns cfg rendered under p, from the cache when it was rendered
// under the same projection before, with the cache entry (nil when
// nothing was cached: no cache, no configuration, or nothing read of it).
func (c *configDocCache) doc(cfg *kubeletconfigv1beta1.KubeletConfiguration, p *projection) (any, *configDoc, error) {
	if c == nil || cfg == nil || p == nil {
		doc, err := kubeletConfigDoc(cfg, p)
		return doc, nil, err
	}
	key := configKey{config: weak.Make(cfg), projection: p}
	if v, ok := c.entries.Load(key); ok {
		cached := v.(*configDoc)
		return cached.doc, cached, nil
	}
	doc, err := kubeletConfigDoc(cfg, p)
	if err != nil {
		return nil, nil, err
	}
	v, loaded := c.entries.LoadOrStore(key, &configDoc{id: c.lastID.Add(1), projection: p, doc: doc})
	if !loaded {
		runtime.AddCleanup(cfg, func(k configKey) { c.entries.Delete(k) }, key)
	}
	cached := v.(*configDoc)
	return cached.doc, cached, nil
}
