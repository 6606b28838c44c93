package fastjson

import "slices"

// KeySet notices a repeated key among an object's members: encoding/json
// merges or overwrites a repeated key, and two readers of one document
// must never see different values, so readers refuse it. A short list
// serves the usual handful of keys without allocating; a set takes over
// past it. The zero value is empty.
type KeySet struct {
	// buf[:n] are the keys while they are few; no slice of buf is kept,
	// which would point the set at itself and move it to the heap.
	buf [8]string
	n   int
	set map[string]struct{}
}

// Repeated adds key and reports whether it was already there.
func (k *KeySet) Repeated(key string) bool {
	if k.set != nil {
		if _, ok := k.set[key]; ok {
			return true
		}
		k.set[key] = struct{}{}
		return false
	}
	if slices.Contains(k.buf[:k.n], key) {
		return true
	}
	if k.n < len(k.buf) {
		k.buf[k.n] = key
		k.n++
		return false
	}
	k.set = make(map[string]struct{}, 2*len(k.buf))
	for _, s := range k.buf {
		k.set[s] = struct{}{}
	}
	k.set[key] = struct{}{}
	return false
}
