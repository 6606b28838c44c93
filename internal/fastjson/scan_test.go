package fastjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"
)

func TestScanAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range scanSeeds() {
		t.Run(doc, func(t *testing.T) { checkScan(t, []byte(doc)) })
	}
}

// FuzzScan checks that the scanner accepts exactly what encoding/json
// accepts, and that its index lists the same fields gjson finds.
func FuzzScan(f *testing.F) {
	for _, doc := range scanSeeds() {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkScan)
}

func scanSeeds() []string {
	return []string{
		``, ` `, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e+10`, `-12.25E-3`,
		`{"a":1}`, ` { "a" : [ 1 , 2 ] , "b" : { "c" : "d" } } `, `{"request":{"uid":"x","object":{"metadata":{"name":"n"}}}}`,
		`"plain string longer than eight bytes"`, `"esc \" \\ \/ \b \f \n \r \t \u00e9 done"`, `"\u12"`, `"\x"`, "\"tab\there\"",
		`"` + strings.Repeat("abcdefgh", 20) + `"`, "\"\xff\xfe invalid utf-8 is accepted\"",
		`01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `{"a":1,}`, `{"a":1}x`, `[[[[`, `]`,
		strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1),
		strings.Repeat(`{"a":`, 10) + `1` + strings.Repeat(`}`, 10),
		`{"dup":1,"dup":2}`, `{"k\"ey":1}`, `{"a":1,"\u0061":2}`, `{"a":{"b":{"c":{"d":1,"d":2}}}}`, `{"a":{"b":{"c":{"d":{"e":1,"e":2}}}}}`,
		`[{"a":[{"b":1,"b":2}]}]`, `{"a":{"x":1},"b":{"x":1}}`, `{"k":{` + manyKeys(40, false) + `}}`, `{"k":{` + manyKeys(40, true) + `}}`,
	}
}

func checkScan(t *testing.T, data []byte) {
	text := unsafe.String(unsafe.SliceData(data), len(data))
	idx, unique, ok := scan(data, text)
	nested := strings.Count(text, "[")+strings.Count(text, "{") > maxNesting
	if want := json.Valid(data); ok != want && !(want && nested) {
		t.Fatalf("scan(%q) ok = %v, encoding/json.Valid = %v", data, ok, want)
	}
	if !ok {
		return
	}
	if want := !repeatsKey(gjson.Parse(text), 0); unique != want {
		t.Fatalf("scan(%q) unique = %v, want %v", data, unique, want)
	}
	// Every object at depth <= indexDepth is indexed, once.
	if want := countObjects(gjson.Parse(text), 0); len(idx.objects) != want {
		t.Fatalf("scan(%q) indexed %d objects, want %d", data, len(idx.objects), want)
	}
	// Every indexed object lists the fields gjson walks, in order, with
	// the same raw keys and values.
	for _, o := range idx.objects {
		start, fields := o.start, idx.fields[o.from:o.to]
		var want []string
		var object json.RawMessage
		if err := json.NewDecoder(strings.NewReader(text[start:])).Decode(&object); err != nil {
			t.Fatalf("object at %d of %q: %v", start, data, err)
		}
		gjson.Parse(string(object)).ForEach(func(key, value gjson.Result) bool {
			want = append(want, key.Raw+":"+value.Raw)
			return true
		})
		var got []string
		for _, f := range fields {
			got = append(got, `"`+f.key+`":`+text[f.start:f.end])
			if f.keyEscaped != strings.Contains(f.key, `\`) {
				t.Fatalf("object at %d of %q: key %q escaped = %v", start, data, f.key, f.keyEscaped)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("object at %d of %q: indexed %q, gjson walks %q", start, data, got, want)
		}
	}
}

func TestPlain8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"abcdefgh", true}, {"\xff\xfe\x80\x7f !#~", true}, {`abc"efgh`, false}, {`abcdefg\`, false},
		{"abc\x1fefgh", false}, {"\x00bcdefgh", false}, {"abcdefg\x20", true}, {"\x21\x21\x21\x21\x21\x21\x21\x21", true},
	} {
		b := []byte(tc.in)
		x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if got := plain8(x); got != tc.want {
			t.Errorf("plain8(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	doc := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"metadata":{"name":"n","managedFields":[` +
		strings.Repeat(`{"manager":"kubelet","fieldsV1":{"f:status":{"f:images":{}}}},`, 50) + `{}]},"status":{"images":[` +
		strings.Repeat(`{"names":["registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"],"sizeBytes":123456},`, 40) + `{}]}}}}`)
	b.SetBytes(int64(len(doc)))
	b.Run("scan", func(b *testing.B) {
		text := unsafe.String(unsafe.SliceData(doc), len(doc))
		for b.Loop() {
			if _, _, ok := scan(doc, text); !ok {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("gjson.ValidBytes", func(b *testing.B) {
		for b.Loop() {
			if !gjson.ValidBytes(doc) {
				b.Fatal("invalid")
			}
		}
	})
}

func TestKeySet(t *testing.T) {
	var k KeySet
	for i := range 40 { // past the short list into the set
		key := strings.Repeat("k", i+1)
		if k.Repeated(key) {
			t.Fatalf("%q reported repeated on first sight", key)
		}
		for j := 0; j <= i; j += 7 {
			if again := strings.Repeat("k", j+1); !k.Repeated(again) {
				t.Fatalf("%q not reported repeated after %d keys", again, i+1)
			}
		}
	}
}

func TestMembers(t *testing.T) {
	type member struct {
		key     string
		escaped bool
		value   string
	}
	for _, tc := range []struct {
		text   string
		ok     bool
		want   []member
		stopAt int // members visited before the callback says stop; 0 is never
	}{
		{text: `{}`, ok: true},
		{text: " \n{\"a\": \"x\\ny\" , \"b\":{\"c\":[1,2]},\"\\u0064\":null}\t", ok: true,
			want: []member{{"a", false, `"x\ny"`}, {"b", false, `{"c":[1,2]}`}, {`\u0064`, true, "null"}}},
		{text: `{"a":1,"b":2,"c":3}`, ok: true, want: []member{{"a", false, "1"}, {"b", false, "2"}}, stopAt: 2},
		{text: `{"a":1,"a":2}`, ok: true, want: []member{{"a", false, "1"}, {"a", false, "2"}}},
		{text: `[{"a":1}]`},
		{text: `"{}"`},
		{text: `{"a":1`},
		{text: `{"a":1}{}`},
		{text: `{"a":"\x"}`},
		{text: ``},
	} {
		var got []member
		ok := Members(tc.text, func(key string, escaped bool, value string) bool {
			got = append(got, member{key, escaped, value})
			return len(got) != tc.stopAt
		})
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Members(%q) = %v, %+v; want %v, %+v", tc.text, ok, got, tc.ok, tc.want)
		}
	}
}

// repeatsKey is the reference for scan's unique: whether an object at
// depth <= uniqueKeysDepth repeats a key, keys decoded by encoding/json.
func repeatsKey(v gjson.Result, depth int) bool {
	if depth > uniqueKeysDepth || !(v.IsObject() || v.IsArray()) {
		return false
	}
	seen := map[string]bool{}
	repeated := false
	v.ForEach(func(key, value gjson.Result) bool {
		if v.IsObject() {
			var k string
			if err := json.Unmarshal([]byte(key.Raw), &k); err != nil || seen[k] {
				repeated = true
			}
			seen[k] = true
		}
		repeated = repeated || repeatsKey(value, depth+1)
		return !repeated
	})
	return repeated
}

// manyKeys is n members with distinct keys, or with the last repeating the
// first, past the scanner's linear check.
func manyKeys(n int, repeat bool) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if repeat && i == n-1 {
			i = 0
		}
		fmt.Fprintf(&b, `"key-%d":%d`, i, i)
	}
	return b.String()
}

// countObjects counts the objects at depth <= indexDepth in v, at depth.
func countObjects(v gjson.Result, depth int) int {
	if depth > indexDepth || !(v.IsObject() || v.IsArray()) {
		return 0
	}
	n := 0
	if v.IsObject() {
		n = 1
	}
	v.ForEach(func(_, child gjson.Result) bool {
		n += countObjects(child, depth+1)
		return true
	})
	return n
}
