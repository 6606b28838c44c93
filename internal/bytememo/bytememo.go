package bytememo

import (
	"hash/maphash"

	"k8s.io/utils/lru"

	"github.com/nodeguard/nodeguard/internal/doorkeeper"
)

// Memo remembers values of type V by byte-string keys, at most a fixed
// number (least recently used first out). Safe for concurrent use.
type Memo[V any] struct {
	seed     maphash.Seed
	entries  *lru.Cache // digest -> entry[V]
	seenOnce *doorkeeper.Doorkeeper
}

type entry[V any] struct {
	key   string
	value V
}

// New returns a Memo of at most entries values, whose doorkeeper keeps
// doorkeeperSlots digests of keys seen once (8 bytes each).
func New[V any](entries, doorkeeperSlots int) *Memo[V] {
	return &Memo[V]{seed: maphash.MakeSeed(), entries: lru.New(max(entries, 1)), seenOnce: doorkeeper.New(doorkeeperSlots)}
}

// Sum digests key, for Get and Put: a lookup that misses and then stores
// digests the key once.
func (m *Memo[V]) Sum(key []byte) uint64 { return maphash.Bytes(m.seed, key) }

// Get returns the value remembered for key, whose digest is sum.
func (m *Memo[V]) Get(key []byte, sum uint64) (V, bool) {
	if v, ok := m.entries.Get(sum); ok {
		if e := v.(entry[V]); e.key == string(key) {
			return e.value, true
		}
	}
	var zero V
	return zero, false
}

// Put remembers value for key, whose digest is sum, if key was seen before
// (a Put, not a Get, is a sighting); a colliding entry is replaced.
func (m *Memo[V]) Put(key []byte, sum uint64, value V) {
	if !m.seenOnce.SeenBefore(sum) {
		return
	}
	m.entries.Add(sum, entry[V]{key: string(key), value: value})
}

// Len is the number of values remembered.
func (m *Memo[V]) Len() int { return m.entries.Len() }
