package policy

import (
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"math"
	"slices"
	"strings"

	"k8s.io/utils/lru"

	"github.com/nodeguard/nodeguard/internal/doorkeeper"
)

// admissionMemoEntries bounds the verdicts a policy set remembers: enough
// for one distinct projected input per node of a large cluster.
const admissionMemoEntries = 16384

// doorkeeperSlots is how many once-seen inputs the memo keeps in mind (by
// digest, 8 bytes each) while waiting for a second sighting.
const doorkeeperSlots = 8192

// verdictMemo remembers admission verdicts by the projected input they
// were reached for. A verdict is a function of the input, the policy set
// and its data, and of the answers of non-deterministic built-ins (the
// graph's, time, randomness): a memo lives as long as its policy set (whose
// data never changes), and only evaluations that called no
// non-deterministic built-in are remembered. The prefilter's skips are
// verdicts too, remembered unless they rested on the graph.
//
// It pays off because the projection leaves out what policies cannot read:
// a kubelet's status updates of its Node differ in heartbeats, images,
// resourceVersion and the review's uid, none of which the shipped policies
// read, so every update of a node after the first projects to the same
// input. The same goes for a GitOps controller's server-side dry runs of
// unchanged ConfigMaps on every sync. The input is still rendered for every
// review; what a hit spares is the prefilter, converting the input to Rego
// values and evaluating.
//
// A verdict is remembered only when its input comes a second time (the
// doorkeeper of TinyLFU): inputs that never repeat (most edits, admins'
// writes) would otherwise fill the memo, up to its bound, with verdicts
// never asked for again, which a soak showed.
type verdictMemo struct {
	seed  maphash.Seed
	cache *lru.Cache // hash -> memoEntry
	// seenOnce holds digests of inputs evaluated once (get compares
	// inputs in full).
	seenOnce *doorkeeper.Doorkeeper
}

type memoEntry struct {
	// doc is a copy of the rendered input, sharing no memory with the
	// review it came from.
	doc    any
	result AdmissionResult
}

func newVerdictMemo() *verdictMemo {
	return &verdictMemo{seed: maphash.MakeSeed(), cache: lru.New(admissionMemoEntries), seenOnce: doorkeeper.New(doorkeeperSlots)}
}

// hash digests a rendered input; ok is false for a document holding a
// type the renderers do not produce, which is then never remembered.
func (m *verdictMemo) hash(doc any) (sum uint64, ok bool) {
	if m == nil {
		return 0, false
	}
	var h maphash.Hash
	h.SetSeed(m.seed)
	if !hashDoc(&h, doc) {
		return 0, false
	}
	return h.Sum64(), true
}

// get returns the verdict remembered for doc, if any.
func (m *verdictMemo) get(doc any, sum uint64, ok bool) (AdmissionResult, bool) {
	if m == nil || !ok {
		return AdmissionResult{}, false
	}
	v, found := m.cache.Get(sum)
	if !found {
		return AdmissionResult{}, false
	}
	entry := v.(memoEntry)
	// Equal digests are not equal inputs.
	if !equalDoc(entry.doc, doc) {
		return AdmissionResult{}, false
	}
	return entry.result.clone(), true
}

// put remembers a verdict, with a copy of the input, if the input was seen
// before: the rendered input shares its strings with the review's body,
// which the memo must neither keep alive nor see reused.
func (m *verdictMemo) put(doc any, sum uint64, result AdmissionResult) {
	if m == nil {
		return
	}
	if !m.seenOnce.SeenBefore(sum) {
		return
	}
	m.cache.Add(sum, memoEntry{doc: copyDoc(doc), result: result.clone()})
}

// clone copies the lists, so that no caller shares them with the memo.
func (r AdmissionResult) clone() AdmissionResult {
	return AdmissionResult{Deny: slices.Clone(r.Deny), Warn: slices.Clone(r.Warn)}
}

// Tags keep documents of different shapes from digesting alike.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagString
	tagNumber
	tagArray
	tagObject
	tagRendering
)

// hashDoc digests the values the input renderers produce: JSON values as
// decoded (nil, bool, string, json.Number, []any, map[string]any), the
// []string the review's user groups and extra are, and cached
// configuration renderings (*configDoc), by identity.
func hashDoc(h *maphash.Hash, doc any) bool {
	switch x := doc.(type) {
	case nil:
		h.WriteByte(tagNull)
	case bool:
		if x {
			h.WriteByte(tagTrue)
		} else {
			h.WriteByte(tagFalse)
		}
	case string:
		h.WriteByte(tagString)
		writeString(h, x)
	case json.Number:
		h.WriteByte(tagNumber)
		writeString(h, string(x))
	case []string:
		h.WriteByte(tagArray)
		writeLen(h, len(x))
		for _, s := range x {
			h.WriteByte(tagString)
			writeString(h, s)
		}
	case []any:
		h.WriteByte(tagArray)
		writeLen(h, len(x))
		for _, item := range x {
			if !hashDoc(h, item) {
				return false
			}
		}
	case *configDoc:
		// A cached rendering stands for itself (see renderedAdmission).
		h.WriteByte(tagRendering)
		maphash.WriteComparable(h, x)
	case map[string]any:
		h.WriteByte(tagObject)
		writeLen(h, len(x))
		// The keys of the small objects a rendering holds are sorted on
		// the stack: allocating for them was a fifth of the digest.
		var stack [16]string
		keys := stack[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			writeString(h, k)
			if !hashDoc(h, x[k]) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

func writeLen(h *maphash.Hash, n int) { writeUint64(h, uint64(n)) }

func writeUint64(h *maphash.Hash, n uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	_, _ = h.Write(b[:])
}

func writeString(h *maphash.Hash, s string) {
	writeLen(h, min(len(s), math.MaxInt))
	_, _ = h.WriteString(s)
}

// copyDoc deep-copies a document hashDoc accepted, strings included.
func copyDoc(doc any) any {
	switch x := doc.(type) {
	case string:
		return strings.Clone(x)
	case json.Number:
		return json.Number(strings.Clone(string(x)))
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = strings.Clone(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = copyDoc(item)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[strings.Clone(k)] = copyDoc(v)
		}
		return out
	default:
		return x
	}
}

// equalDoc compares two documents hashDoc accepted; reflect.DeepEqual
// cost a third of a remembered answer.
func equalDoc(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case []string:
		y, ok := b.([]string)
		return ok && slices.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalDoc(x[i], y[i]) {
				return false
			}
		}
		return true
	case *configDoc:
		y, ok := b.(*configDoc)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalDoc(v, w) {
				return false
			}
		}
		return true
	}
	return false
}
