// Package fastjson reads the JSON the kube-apiserver writes into review
// requests without reflection, for the webhook's hot paths.
//
// Decoding reviews through encoding/json's reflection was most of the cost
// of /authorize and /validate, much of it growing the stack of the fresh
// goroutine each HTTP/2 request runs on. A Reader walks a document with
// gjson and accepts only canonical shapes: strings without escapes, valid
// UTF-8, no repeated keys, the expected types. At the first value of any
// other shape it fails, and its caller decodes the document with
// k8s.io/apimachinery's reflective decoder instead, which has the final
// word; callers fuzz both paths against each other.
package fastjson

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Reader reads canonical JSON; Failed reports whether anything was not.
type Reader struct {
	failed bool
	data   []byte
	text   string
	// index holds the fields of the document's top levels (scan).
	index index
	// unique: no object of the document's top levels repeats a key.
	unique bool
}

// Parse validates the document and returns its root, or fails for invalid
// JSON. gjson only reads the string: viewing the bytes as one avoids
// copying the document.
func (r *Reader) Parse(data []byte) gjson.Result {
	text := unsafe.String(unsafe.SliceData(data), len(data))
	idx, unique, ok := scan(data, text)
	if !ok {
		r.failed = true
		return gjson.Result{}
	}
	r.data, r.text, r.index, r.unique = data, text, idx, unique
	return gjson.Parse(text)
}

// UniqueKeys reports whether the parsed document repeats no key in any
// object of its top four levels (root, depths 1 to 3): for a review, the
// objects it carries and their metadata, spec, status or data. Readers of
// those may stop once they have what they need. False before Parse, or
// after a Parse that failed.
func (r *Reader) UniqueKeys() bool { return r.unique }

// offset is where v's JSON starts in the parsed document, if it is a view
// into it (every value gjson and the index hand out is).
func (r *Reader) offset(v gjson.Result) (int, bool) {
	if len(v.Raw) == 0 || len(r.text) == 0 {
		return 0, false
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(v.Raw))) - uintptr(unsafe.Pointer(unsafe.StringData(r.text))))
	if off < 0 || off+len(v.Raw) > len(r.text) {
		return 0, false
	}
	return off, true
}

// Failed reports whether a value of a non-canonical shape was met.
func (r *Reader) Failed() bool { return r.failed }

// Fail marks the document as non-canonical.
func (r *Reader) Fail() { r.failed = true }

// String reads a string; null is "".
func (r *Reader) String(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		// Escapes and invalid UTF-8 have corner cases (lone surrogates,
		// replacement characters) best left to encoding/json.
		if strings.IndexByte(v.Raw, '\\') >= 0 || !utf8.ValidString(v.Str) {
			r.failed = true
			return ""
		}
		return v.Str
	case gjson.Null:
		return ""
	}
	r.failed = true
	return ""
}

// Strings reads an array of strings; null is nil, [] is empty and not nil.
func (r *Reader) Strings(v gjson.Result) []string {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		r.failed = true
		return nil
	}
	out := []string{}
	v.ForEach(func(_, item gjson.Result) bool {
		if item.Type != gjson.String {
			r.failed = true
			return false
		}
		out = append(out, r.String(item))
		return !r.failed
	})
	return out
}

// Bool reads a boolean.
func (r *Reader) Bool(v gjson.Result) bool {
	switch v.Type {
	case gjson.True:
		return true
	case gjson.False:
		return false
	}
	r.failed = true
	return false
}

// Raw returns a value's JSON, or nil for null, as runtime.RawExtension
// keeps it: a view into the document (which the review owns), so that
// the objects a review carries are never copied.
func (r *Reader) Raw(v gjson.Result) []byte {
	if v.Type == gjson.Null {
		return nil
	}
	if off, ok := r.offset(v); ok {
		end := off + len(v.Raw)
		return r.data[off:end:end]
	}
	return []byte(v.Raw)
}

// Object walks an object's fields and reports whether it was an object
// (null is not, and does not fail). A repeated key fails: encoding/json
// merges a repeated struct-valued field into the first, which only the
// reflective decoder reproduces; the apiserver never repeats keys.
func (r *Reader) Object(v gjson.Result, field func(key string, value gjson.Result)) bool {
	if v.Type == gjson.Null {
		return false
	}
	if !v.IsObject() {
		r.failed = true
		return false
	}
	// An indexed object's fields are known already: its values, however
	// large, are not read again. (Each walk has its own key set: the one
	// the closure below captures lives on the heap.)
	if off, ok := r.offset(v); ok {
		if fields, indexed := r.index.lookup(off); indexed {
			var seen KeySet
			for _, f := range fields {
				if !r.member(&seen, f.key, f.keyEscaped, gjson.Parse(r.text[f.start:f.end]), field) {
					break
				}
			}
			return !r.failed
		}
	}
	var seen KeySet
	v.ForEach(func(key, value gjson.Result) bool {
		return r.member(&seen, key.Str, strings.IndexByte(key.Raw, '\\') >= 0, value, field)
	})
	return !r.failed
}

// member hands one member to field, unless its key is escaped, not valid
// UTF-8 (encoding/json, which has the final word, makes it U+FFFD), or
// repeated, which fail.
func (r *Reader) member(seen *KeySet, key string, escaped bool, value gjson.Result, field func(key string, value gjson.Result)) bool {
	if escaped || !utf8.ValidString(key) || seen.Repeated(key) {
		r.failed = true
		return false
	}
	field(key, value)
	return !r.failed
}

// StringLists reads an object of string arrays (a user's extra info); null
// is nil, {} is empty and not nil.
func StringLists[V ~[]string](r *Reader, v gjson.Result) map[string]V {
	if v.Type == gjson.Null {
		return nil
	}
	out := map[string]V{}
	r.Object(v, func(key string, value gjson.Result) { out[key] = V(r.Strings(value)) })
	return out
}

// Decode decodes a JSON object into a T: with read when the document is
// canonical, through k8s.io/apimachinery's case-sensitive reflective
// decoder otherwise (which then also reports what is malformed).
func Decode[T any](data []byte, read func(r *Reader, root gjson.Result, out *T)) (T, error) {
	out, _, err := DecodeUnique(data, read)
	return out, err
}

// DecodeUnique is Decode, also reporting Reader.UniqueKeys of the document
// (false when it did not decode).
func DecodeUnique[T any](data []byte, read func(r *Reader, root gjson.Result, out *T)) (out T, uniqueKeys bool, err error) {
	var r Reader
	if root := r.Parse(data); !r.Failed() && root.IsObject() {
		if read(&r, root, &out); !r.Failed() {
			return out, r.UniqueKeys(), nil
		}
		out = *new(T)
	}
	if err := utiljson.Unmarshal(data, &out); err != nil {
		var zero T
		return zero, false, err
	}
	// The reader fell back, but the scan stands when it got that far.
	return out, r.UniqueKeys(), nil
}

// Members walks the members of the JSON object text, handing over each key
// as written (escaped when it holds a backslash) and each value's JSON,
// both views into text, neither decoded: a reader after one member of a
// large object (a ConfigMap's data) unquotes only that one, and only if it
// must. ok is false, and nothing is visited, when text is not exactly one
// valid JSON object.
func Members(text string, member func(key string, escaped bool, value string) bool) (ok bool) {
	data := unsafe.Slice(unsafe.StringData(text), len(text))
	idx, _, ok := scan(data, text)
	if !ok {
		return false
	}
	start := len(text) - len(strings.TrimLeft(text, " \t\r\n"))
	fields, isObject := idx.lookup(start)
	if !isObject || text[start] != '{' {
		return false
	}
	for _, f := range fields {
		if !member(f.key, f.keyEscaped, text[f.start:f.end]) {
			break
		}
	}
	return true
}
