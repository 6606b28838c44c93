package scale

import (
	"bytes"
	"compress/gzip"
	"io"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
)

// chunkedBody is a response body that gives its pieces one Read each, as a
// watch stream arrives in frames; a fake because the point is where the
// pieces split, which no real apiserver lets a test choose.
type chunkedBody struct{ pieces [][]byte }

func (b *chunkedBody) Read(p []byte) (int, error) {
	if len(b.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.pieces[0])
	if b.pieces[0] = b.pieces[0][n:]; len(b.pieces[0]) == 0 {
		b.pieces = b.pieces[1:]
	}
	return n, nil
}

func (b *chunkedBody) Close() error { return nil }

// readThrough reads the tapped body to its end as the proxy does, closes
// it and waits for its decoder, returning what passed through.
func readThrough(t *testing.T, tb *tappedBody) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := tb.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	<-tb.decoded
	return out
}

// tick is a clock that moves one millisecond at each reading.
func tick() func() time.Time {
	n := int64(0)
	return func() time.Time { n++; return time.UnixMilli(n) }
}

func TestTapRecordsEachNodeEventAtTheChunkThatCompletedIt(t *testing.T) {
	// A recorded JSON watch of Nodes (objects trimmed), with a BOOKMARK
	// and the ERROR an apiserver sends when it cannot resume.
	added := `{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"10","labels":{"x":"y"}},"status":{"conditions":[{"type":"Ready","status":"True"}]}}}` + "\n"
	modified := `{"type":"MODIFIED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"12"},"spec":{}}}` + "\n"
	bookmark := `{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"13","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"
	other := `{"type":"MODIFIED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"b","resourceVersion":"14"}}}` + "\n"
	failed := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 9 (13)","reason":"Expired","code":410}}` + "\n"
	stream := added + modified + bookmark + other + failed
	// Read 1 ends inside the MODIFIED event, read 2 completes it and
	// ends inside b's, read 3 completes b's.
	cut1, cut2 := len(added)+20, len(added)+len(modified)+len(bookmark)+7
	body := &chunkedBody{pieces: [][]byte{[]byte(stream[:cut1]), []byte(stream[cut1:cut2]), []byte(stream[cut2:])}}

	d := newDeliveries()
	d.start()
	got := readThrough(t, newTap(body, d, "application/json", false, tick()))
	if !bytes.Equal(got, []byte(stream)) {
		t.Errorf("the stream changed on its way through:\n%s", got)
	}
	want := map[string][]delivery{
		"a": {{RV: 10, At: time.UnixMilli(1)}, {RV: 12, At: time.UnixMilli(2)}},
		"b": {{RV: 14, At: time.UnixMilli(3)}},
	}
	if len(d.byNode) != len(want) {
		t.Errorf("recorded %v, want %v", d.byNode, want)
	}
	for node, w := range want {
		g := d.byNode[node]
		if len(g) != len(w) {
			t.Errorf("%s: recorded %v, want %v", node, g, w)
			continue
		}
		for i := range w {
			if g[i].RV != w[i].RV || !g[i].At.Equal(w[i].At) {
				t.Errorf("%s: recorded %v, want %v", node, g, w)
			}
		}
	}
}

func TestTapDecompressesAGzippedWatch(t *testing.T) {
	// The apiserver gzips a watch that starts with a list, one gzip
	// member per flush, a flush per event: a sync flush, then the
	// member's end.
	events := []string{
		`{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"10"}}}` + "\n",
		`{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"11","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n",
		`{"type":"MODIFIED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"12"}}}` + "\n",
	}
	var members [][]byte
	for _, e := range events {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write([]byte(e)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		members = append(members, b.Bytes())
	}
	// Read 1 is the first member and part of the bookmark's header, read
	// 2 the rest of it and the MODIFIED's up to its sync flush, read 3
	// the MODIFIED member's end (its final block and trailer).
	all := bytes.Join(members, nil)
	cut1, cut2 := len(members[0])+4, len(all)-10
	body := &chunkedBody{pieces: [][]byte{all[:cut1], all[cut1:cut2], all[cut2:]}}
	d := newDeliveries()
	d.start()
	if got := readThrough(t, newTap(body, d, "application/json", true, tick())); !bytes.Equal(got, all) {
		t.Error("the stream changed on its way through")
	}
	want := []delivery{{RV: 10, At: time.UnixMilli(1)}, {RV: 12, At: time.UnixMilli(2)}}
	if g := d.byNode["a"]; len(g) != 2 || g[0].RV != want[0].RV || !g[0].At.Equal(want[0].At) || g[1].RV != want[1].RV || !g[1].At.Equal(want[1].At) {
		t.Errorf("recorded %v, want %v", d.byNode, want)
	}
}

// protobufWatch encodes events as the apiserver streams a watch in
// protobuf, as client-go's typed clients ask for it: a length-delimited
// frame per event.
func protobufWatch(t *testing.T, events ...metav1.WatchEvent) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	var out bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&out),
		scheme.Codecs.EncoderForVersion(info.StreamSerializer.Serializer, metav1.Unversioned))
	for _, e := range events {
		if err := enc.Encode(&e); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func protobufObject(t *testing.T, obj runtime.Object) runtime.RawExtension {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	raw, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

func TestTapDecodesAProtobufWatch(t *testing.T) {
	node := func(name, rv string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	first := protobufWatch(t, metav1.WatchEvent{Type: "ADDED", Object: protobufObject(t, node("a", "10"))})
	rest := protobufWatch(t,
		metav1.WatchEvent{Type: "BOOKMARK", Object: protobufObject(t, node("", "11"))},
		metav1.WatchEvent{Type: "MODIFIED", Object: protobufObject(t, node("b", "14"))},
		metav1.WatchEvent{Type: "ERROR", Object: protobufObject(t, &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})},
	)
	stream := append(first, rest...)
	// Read 1 ends inside the first frame's length, read 2 inside the
	// bookmark, read 3 has the rest.
	body := &chunkedBody{pieces: [][]byte{stream[:2], stream[2 : len(first)+5], stream[len(first)+5:]}}
	d := newDeliveries()
	d.start()
	if got := readThrough(t, newTap(body, d, "application/vnd.kubernetes.protobuf;stream=watch", false, tick())); !bytes.Equal(got, stream) {
		t.Error("the stream changed on its way through")
	}
	a, b := d.byNode["a"], d.byNode["b"]
	if len(d.byNode) != 2 || len(a) != 1 || a[0].RV != 10 || !a[0].At.Equal(time.UnixMilli(2)) || len(b) != 1 || b[0].RV != 14 || !b[0].At.Equal(time.UnixMilli(3)) {
		t.Errorf("recorded %v, want a@10 at read 2, b@14 at read 3", d.byNode)
	}
}

func TestTapPassesAStreamItCannotDecode(t *testing.T) {
	stream := "not a watch stream {{{" + string(bytes.Repeat([]byte("x"), 10000))
	d := newDeliveries()
	d.start()
	got := readThrough(t, newTap(&chunkedBody{pieces: [][]byte{[]byte(stream)}}, d, "application/json", false, tick()))
	if string(got) != stream {
		t.Errorf("the stream changed on its way through: %d bytes, want %d", len(got), len(stream))
	}
	if len(d.byNode) != 0 {
		t.Errorf("recorded %v from a stream that is not JSON", d.byNode)
	}
	got = readThrough(t, newTap(&chunkedBody{pieces: [][]byte{[]byte(stream)}}, d, "application/vnd.kubernetes.protobuf;stream=watch", true, tick()))
	if string(got) != stream || len(d.byNode) != 0 {
		t.Errorf("a stream said to be gzipped and not: %d bytes passed of %d, recorded %v", len(got), len(stream), d.byNode)
	}
}

func TestOwnShareFindsTheControllersDeliveryOfTheUpdate(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	d := newDeliveries()
	d.start()
	d.record("a", 10, at(90))
	d.record("a", 15, at(120))
	d.record("a", 20, at(300))

	for _, c := range []struct {
		node, rv string
		at       time.Time
		m        match
	}{
		{"a", "15", at(120), matchExact},
		{"a", "12", at(120), matchLater},
		{"a", "9", at(90), matchLater}, // 9 < 10 as integers, not as strings
		{"a", "21", time.Time{}, matchNone},
		{"b", "15", time.Time{}, matchNone},
		{"a", "not-a-version", time.Time{}, matchNone},
	} {
		got, m := d.lookup(c.node, c.rv)
		if m != c.m || !got.Equal(c.at) {
			t.Errorf("lookup(%s, %s) = %v, %v; want %v, %v", c.node, c.rv, got, m, c.at, c.m)
		}
	}

	events := []nodeEvent{
		{at: at(100), node: "a", updated: true, rv: "15"}, // the controller had it at 120
		{at: at(200), node: "x"},                          // patch sent at 150
		{at: at(210), node: "a", updated: true, rv: "17"}, // it had 20 first, at 300
		{at: at(400), node: "y"},                          // patch sent at 350
		{at: at(410), node: "a", updated: true, rv: "25"}, // never given
		{at: at(500), node: "z"},                          // patch sent at 450
	}
	patches := map[string]wireTiming{"x": {Sent: at(150)}, "y": {Sent: at(350)}, "z": {Sent: at(450)}}
	own, _, vs, found := ownShares(events, patches, d)
	if found != (OwnShareMatches{Exact: 1, Later: 1, Unmatched: 1}) {
		t.Errorf("matches = %+v, want one exact, one later, one unmatched", found)
	}
	wantOwn := []time.Duration{30 * time.Millisecond, 50 * time.Millisecond}
	wantVs := []time.Duration{20 * time.Millisecond, 90 * time.Millisecond}
	if !slices.Equal(own, wantOwn) || !slices.Equal(vs, wantVs) {
		t.Errorf("own shares %v vs harness %v; want %v and %v", own, vs, wantOwn, wantVs)
	}
}

// The harness's watch shows b's update before a's and the assignment of x
// between them; the controller was given a's first, and sent x's patch
// before it was given b's. Paired on the harness's order x would answer
// b, an update the controller had not been given: a negative share.
func TestOwnSharePairsOnTheControllersTimeline(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	d := newDeliveries()
	d.start()
	d.record("a", 5, at(100))
	d.record("b", 7, at(300))
	events := []nodeEvent{
		{at: at(150), node: "b", updated: true, rv: "7"},
		{at: at(160), node: "x"}, // patch sent at 120
		{at: at(310), node: "a", updated: true, rv: "5"},
		{at: at(400), node: "y"}, // patch sent at 330
		{at: at(410), node: "z"}, // patch sent at 340: no update left waiting
	}
	// y's first patch met a conflict at 310 and was sent again at 330.
	patches := map[string]wireTiming{"x": {Sent: at(120)}, "y": {First: at(310), Sent: at(330)}, "z": {Sent: at(340)}}
	if got := reactions(events); !slices.Equal(got, []time.Duration{10 * time.Millisecond, 90 * time.Millisecond}) {
		t.Fatalf("the harness's reactions = %v, want x for b and y for a", got)
	}
	own, toFirst, _, _ := ownShares(events, patches, d)
	if want := []time.Duration{20 * time.Millisecond, 30 * time.Millisecond}; !slices.Equal(own, want) {
		t.Errorf("own shares = %v, want %v (x for a, y for b)", own, want)
	}
	if want := []time.Duration{20 * time.Millisecond, 10 * time.Millisecond}; !slices.Equal(toFirst, want) {
		t.Errorf("own shares to the first patch = %v, want %v", toFirst, want)
	}
}
