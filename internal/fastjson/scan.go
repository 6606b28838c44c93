package fastjson

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync"
	"unicode/utf8"
)

// maxNesting bounds the scanner's recursion. Kubernetes objects nest a few
// dozen levels at most; deeper documents go to the reflective decoder,
// which has its own limit.
const maxNesting = 256

// indexDepth is how deep the scanner records object fields: the root's and
// its children's, which is where a review's request lives. Walking an
// indexed object costs nothing per byte; walking any other re-reads it.
const indexDepth = 1

// uniqueKeysDepth is how deep the scanner checks that no object repeats a
// key: a review's objects (depth 2) and their metadata, spec, status or data
// (depth 3), which readers may then stop reading once they have what they
// need, without looking for a later repeat of it.
const uniqueKeysDepth = 3

// linearKeys is how many keys an object's repeat check compares one by one
// before it builds a set.
const linearKeys = 32

// field is one member of an indexed object: its key (a view into the
// document) and the position of its value.
type field struct {
	key        string
	keyEscaped bool
	start, end int
}

// index lists the fields of a document's indexed objects: a handful (the
// root and its object members), so a list searched in order beats a map,
// and one array holds every object's fields.
type index struct {
	objects []indexedObject
	fields  []field
}

// indexedObject is where an object starts in the document, and its fields
// in index.fields.
type indexedObject struct {
	start, from, to int
}

// lookup returns the fields of the object that starts at offset start.
func (x *index) lookup(start int) ([]field, bool) {
	for _, o := range x.objects {
		if o.start == start {
			return x.fields[o.from:o.to], true
		}
	}
	return nil, false
}

// scanner validates a whole document in one pass (RFC 8259, as strictly as
// encoding/json) and records, on the way, where the fields of the objects
// at depth <= indexDepth are, so that the review's top levels are never
// read twice. A review's bulk is the raw objects it carries; with the
// index, reading the request skips them by position instead of scanning.
type scanner struct {
	data []byte
	text string // data viewed as a string, for keys
	pos  int
	ok   bool
	// index is what the scan recorded; pending holds the fields of the
	// indexed objects being scanned, innermost last (an object's fields
	// move to the index when it ends, before its parent records the
	// member that holds it).
	index   index
	pending []field
	// keys holds the decoded keys of the objects being checked for
	// repeats, innermost last; repeated records that one was found.
	keys     []string
	repeated bool
}

// scan validates data and indexes its top levels; ok is false for
// anything encoding/json would not accept as exactly one JSON value.
// unique reports that no object at depth <= uniqueKeysDepth repeats a key
// (as encoding/json decodes keys, escapes included).
func scan(data []byte, text string) (idx index, unique, ok bool) {
	s := scanner{data: data, text: text, ok: true}
	scratch := scratchPool.Get().(*scanScratch)
	s.keys, s.pending = scratch.keys[:0], scratch.pending[:0]
	s.skipSpace()
	s.value(0)
	s.skipSpace()
	// Both view data: cleared, so that the pool keeps no document alive.
	clear(s.keys[:cap(s.keys)])
	clear(s.pending[:cap(s.pending)])
	scratch.keys, scratch.pending = s.keys[:0], s.pending[:0]
	scratchPool.Put(scratch)
	if !s.ok || s.pos != len(s.data) {
		return index{}, false, false
	}
	return s.index, !s.repeated, true
}

// scanScratch is what a scan needs only while it runs; every review needs
// one, so they are recycled.
type scanScratch struct {
	keys    []string
	pending []field
}

var scratchPool = sync.Pool{New: func() any {
	return &scanScratch{keys: make([]string, 0, 32), pending: make([]field, 0, 16)}
}}

func (s *scanner) fail() { s.ok = false }

// skipSpace skips whitespace. The apiserver writes compact JSON, so the
// check for none is kept small enough to inline.
func (s *scanner) skipSpace() {
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return
	}
	s.skipSpaceSlow()
}

func (s *scanner) skipSpaceSlow() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) {
	if s.pos >= len(s.data) {
		s.fail()
		return
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		s.object(depth)
	case c == '[':
		s.array(depth)
	case c == '"':
		s.string()
	case c == '-' || (c >= '0' && c <= '9'):
		s.number()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	default:
		s.fail()
	}
}

func (s *scanner) object(depth int) {
	if depth >= maxNesting {
		s.fail()
		return
	}
	start := s.pos
	s.pos++ // {
	record := depth <= indexDepth
	mark := len(s.pending)
	check, base := depth <= uniqueKeysDepth, len(s.keys)
	var seen map[string]struct{} // for an object past linearKeys
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		if record {
			s.indexObject(start, mark)
		}
		return
	}
	for s.ok {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			s.fail()
			return
		}
		keyStart := s.pos + 1
		escaped := s.string()
		keyEnd := s.pos - 1
		s.skipSpace()
		if !s.ok || s.pos >= len(s.data) || s.data[s.pos] != ':' {
			s.fail()
			return
		}
		s.pos++
		s.skipSpace()
		valueStart := s.pos
		s.value(depth + 1)
		if record && s.ok {
			s.pending = append(s.pending, field{key: s.text[keyStart:keyEnd], keyEscaped: escaped, start: valueStart, end: s.pos})
		}
		if check && s.ok && !s.repeated {
			seen = s.checkKey(base, s.text[keyStart:keyEnd], escaped, seen)
		}
		if !s.next('}') {
			if s.ok && record {
				s.indexObject(start, mark)
			}
			s.keys = s.keys[:base]
			return
		}
	}
}

// checkKey notes key, a member of the object whose keys start at
// s.keys[base], and whether it repeats one; past linearKeys members, the
// object's keys move into seen, which it returns.
func (s *scanner) checkKey(base int, key string, escaped bool, seen map[string]struct{}) map[string]struct{} {
	if escaped || !utf8.ValidString(key) {
		// Rare in what the apiserver writes; decoded as encoding/json
		// decodes keys, so that "\u0061" repeats "a" and invalid UTF-8
		// becomes U+FFFD.
		var decoded string
		if err := json.Unmarshal([]byte(`"`+key+`"`), &decoded); err != nil {
			s.repeated = true // cannot happen for a scanned string; be safe
			return seen
		}
		key = decoded
	}
	keys := s.keys[base:]
	switch {
	case seen != nil:
		_, s.repeated = seen[key]
		seen[key] = struct{}{}
		return seen
	case len(keys) >= linearKeys:
		seen = make(map[string]struct{}, 2*len(keys))
		for _, k := range keys {
			seen[k] = struct{}{}
		}
		_, s.repeated = seen[key]
		seen[key] = struct{}{}
		return seen
	}
	if slices.Contains(keys, key) {
		s.repeated = true
	}
	s.keys = append(s.keys, key)
	return seen
}

// next reads what follows a member or an element: a comma, when more
// follow, or the closing bracket; anything else fails.
func (s *scanner) next(closing byte) (more bool) {
	s.skipSpace()
	if !s.ok || s.pos >= len(s.data) {
		s.fail()
		return false
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		s.skipSpace()
		return true
	case closing:
		s.pos++
		return false
	}
	s.fail()
	return false
}

// indexObject moves the fields of the object starting at start, pending
// from mark on, to the index.
func (s *scanner) indexObject(start, mark int) {
	from := len(s.index.fields)
	s.index.fields = append(s.index.fields, s.pending[mark:]...)
	s.index.objects = append(s.index.objects, indexedObject{start: start, from: from, to: len(s.index.fields)})
	s.pending = s.pending[:mark]
}

func (s *scanner) array(depth int) {
	if depth >= maxNesting {
		s.fail()
		return
	}
	s.pos++ // [
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return
	}
	for s.ok {
		s.value(depth + 1)
		if !s.next(']') {
			return
		}
	}
}

// SWAR constants: one in every byte, and the top bit of every byte.
const (
	ones = 0x0101010101010101
	tops = 0x8080808080808080
)

// plain8 reports whether none of eight bytes ends or escapes a string or
// is a control character, eight bytes per step: most of a review is long
// strings (image names, digests, managed fields). Each test is the classic
// "has a byte below n", (v-ones*n)&^v&tops: a borrow only starts in a byte
// that matches, so the word-wide answer is exact.
func plain8(x uint64) bool {
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	special := (quote - ones) &^ quote
	special |= (backslash - ones) &^ backslash
	special |= (x - ones*0x20) &^ x // a byte below 0x20
	return special&tops == 0
}

// string reads a string from its opening quote and reports whether it
// held escapes. Invalid UTF-8 is accepted, as encoding/json accepts it;
// Reader.String refuses it later.
func (s *scanner) string() (escaped bool) {
	data, i := s.data, s.pos+1 // past the opening quote
	for {
		// Locals, not fields: the loop stays in registers.
		for i+8 <= len(data) && plain8(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && data[i] >= 0x20 && data[i] != '"' && data[i] != '\\' {
			i++
		}
		if i >= len(data) {
			s.pos = i
			s.fail()
			return escaped
		}
		switch data[i] {
		case '"':
			s.pos = i + 1
			return escaped
		case '\\':
			escaped = true
			s.pos = i
			if !s.escape() {
				s.fail()
				return escaped
			}
			i = s.pos
		default: // a control character
			s.pos = i
			s.fail()
			return escaped
		}
	}
}

// escape reads one escape sequence from its backslash.
func (s *scanner) escape() bool {
	if s.pos+1 >= len(s.data) {
		return false
	}
	switch s.data[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return true
	case 'u':
		if s.pos+6 > len(s.data) {
			return false
		}
		for _, h := range s.data[s.pos+2 : s.pos+6] {
			if !isHex(h) {
				return false
			}
		}
		s.pos += 6
		return true
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) number() {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.pos < len(s.data) && s.data[s.pos] >= '1' && s.data[s.pos] <= '9':
		s.digits()
	default:
		s.fail()
		return
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			s.fail()
			return
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			s.fail()
		}
	}
}

func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

func (s *scanner) literal(word string) {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		s.fail()
		return
	}
	s.pos += len(word)
}
