package policy

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync"

	"github.com/nodeguard/nodeguard/internal/bytememo"
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
	verdicts *bytememo.Memo[AdmissionResult] // by the input's encoding
}

func newVerdictMemo() *verdictMemo {
	return &verdictMemo{verdicts: bytememo.New[AdmissionResult](admissionMemoEntries, doorkeeperSlots)}
}

// memoInput is one review's rendered input, encoded for the memo: digested
// and compared as bytes, so that a lookup walks the rendering once.
type memoInput struct {
	encoded []byte
	sum     uint64
	// ok is false when the input cannot be remembered: no memo, or a
	// type the renderers do not produce.
	ok bool
}

// maxPooledEncoding is the largest encoding buffer kept for the next
// review; a rare large input's buffer goes to the collector instead.
const maxPooledEncoding = 64 << 10

var memoInputs = sync.Pool{New: func() any { return &memoInput{encoded: make([]byte, 0, 1024)} }}

// input encodes and digests a rendered input; release it when done.
func (m *verdictMemo) input(doc any) *memoInput {
	in := memoInputs.Get().(*memoInput)
	in.encoded, in.ok = in.encoded[:0], false
	if m == nil {
		return in
	}
	if in.encoded, in.ok = encodeDoc(in.encoded, doc); in.ok {
		in.sum = m.verdicts.Sum(in.encoded)
	}
	return in
}

func (in *memoInput) release() {
	if cap(in.encoded) > maxPooledEncoding {
		in.encoded = nil
	}
	memoInputs.Put(in)
}

// get returns the verdict remembered for in, if any.
func (m *verdictMemo) get(in *memoInput) (AdmissionResult, bool) {
	if m == nil || !in.ok {
		return AdmissionResult{}, false
	}
	result, ok := m.verdicts.Get(in.encoded, in.sum)
	if !ok {
		return AdmissionResult{}, false
	}
	return result.clone(), true
}

// put remembers a verdict for in, if in was seen before.
func (m *verdictMemo) put(in *memoInput, result AdmissionResult) {
	if m == nil || !in.ok {
		return
	}
	m.verdicts.Put(in.encoded, in.sum, result.clone())
}

// clone copies the lists, so that no caller shares them with the memo.
func (r AdmissionResult) clone() AdmissionResult {
	return AdmissionResult{Deny: slices.Clone(r.Deny), Warn: slices.Clone(r.Warn)}
}

// Tags keep documents of different shapes from encoding alike.
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

// encodeDoc appends the encoding of a document the input renderers
// produce: JSON values as decoded (nil, bool, string, json.Number, []any,
// map[string]any), the []string the review's user groups and extra are,
// and cached configuration renderings (*configDoc), by their ID. Every
// value is tagged and every length written, and objects' keys are sorted,
// so that two documents encode alike exactly when they are equal. ok is
// false for any other type.
func encodeDoc(b []byte, doc any) (_ []byte, ok bool) {
	switch x := doc.(type) {
	case nil:
		b = append(b, tagNull)
	case bool:
		if x {
			b = append(b, tagTrue)
		} else {
			b = append(b, tagFalse)
		}
	case string:
		b = appendString(append(b, tagString), x)
	case json.Number:
		b = appendString(append(b, tagNumber), string(x))
	case []string:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(x)))
		for _, s := range x {
			b = appendString(append(b, tagString), s)
		}
	case []any:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(x)))
		for _, item := range x {
			if b, ok = encodeDoc(b, item); !ok {
				return b, false
			}
		}
	case *configDoc:
		// A cached rendering stands for itself (see renderedAdmission).
		b = binary.AppendUvarint(append(b, tagRendering), x.id)
	case map[string]any:
		b = binary.AppendUvarint(append(b, tagObject), uint64(len(x)))
		// The keys of the small objects a rendering holds are sorted on
		// the stack: allocating for them was a fifth of the digest.
		var stack [16]string
		keys := stack[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if b, ok = encodeDoc(appendString(b, k), x[k]); !ok {
				return b, false
			}
		}
	default:
		return b, false
	}
	return b, true
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
