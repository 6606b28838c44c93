package fastjson

import "slices"

// KeySet notices a repeated key among an object's members: encoding/json
// merges or overwrites a repeated key, and two readers of one document
// must never see different values, so readers refuse it. A short list
// serves the usual handful of keys without allocating; a set takes over
// past it. The zero value is empty.
type KeySet struct {
	buf  [8]string
	list []string
	set  map[string]struct{}
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
	if k.list == nil {
		k.list = k.buf[:0]
	}
	if slices.Contains(k.list, key) {
		return true
	}
	if k.list = append(k.list, key); len(k.list) == len(k.buf) {
		k.set = make(map[string]struct{}, 2*len(k.list))
		for _, s := range k.list {
			k.set[s] = struct{}{}
		}
	}
	return false
}
