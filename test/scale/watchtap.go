package scale

import (
	"compress/gzip"
	"io"
	"mime"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

// deliveries records when the counting proxy passed each Node watch event
// on to the controller, by Node name, in the order it passed them. It is
// where the controller's own share of a reaction starts: the moment its
// watch had the update, whatever the harness's own watch was doing.
type deliveries struct {
	mu sync.Mutex
	on bool
	// byNode holds each Node's deliveries in the order they were passed.
	byNode map[string][]delivery
}

// delivery is one watch event the controller was given: the Node's
// resourceVersion in it and when its last byte went through the proxy.
type delivery struct {
	RV uint64    `json:"rv"`
	At time.Time `json:"at"`
}

func newDeliveries() *deliveries { return &deliveries{byNode: map[string][]delivery{}} }

// start forgets what was recorded and records from now on.
func (d *deliveries) start() {
	d.mu.Lock()
	d.byNode, d.on = map[string][]delivery{}, true
	d.mu.Unlock()
}

func (d *deliveries) record(node string, rv uint64, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on {
		d.byNode[node] = append(d.byNode[node], delivery{RV: rv, At: at})
	}
}

// match says how a lookup found the controller's delivery of an update.
type match int

const (
	// matchNone: the controller was given no event of the Node at or
	// after the update's resourceVersion.
	matchNone match = iota
	// matchExact: the controller was given the very same resourceVersion.
	matchExact
	// matchLater: the controller was first given a later resourceVersion
	// (its watch coalesced or relisted past the update).
	matchLater
)

// lookup returns when the controller was given the update of node at
// resourceVersion rv: that very event if it was given it, else the first
// event it was given at or after rv (resourceVersions of one Node compare
// as integers).
func (d *deliveries) lookup(node, rv string) (time.Time, match) {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return time.Time{}, matchNone
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var later time.Time
	for _, e := range d.byNode[node] {
		if e.RV == want {
			return e.At, matchExact
		}
		if e.RV > want && later.IsZero() {
			later = e.At
		}
	}
	if later.IsZero() {
		return later, matchNone
	}
	return later, matchLater
}

// tapChunks bounds the chunks a tap holds for its decoder before the
// stream waits for it: enough that a burst of events never waits on the
// decoder, bounded so that a stuck decoder cannot grow memory without end.
const tapChunks = 4096

// tapWatch wraps the body of a Node watch on its way to the controller:
// every chunk read from it is stamped with the time it went through and
// handed to a decoder in its own goroutine, which records each ADDED,
// MODIFIED and DELETED event (not BOOKMARK, not ERROR) with the stamp of
// the chunk that completed it. The stream itself passes through
// unchanged; the decoder only ever sees a copy. contentType is the
// answer's (protobuf for client-go's typed clients, or JSON); gzipped is a
// stream the apiserver compressed, as it does a watch that starts with a
// list (client-go's informers) for a client that accepts gzip (Go's).
func tapWatch(body io.ReadCloser, d *deliveries, contentType string, gzipped bool) io.ReadCloser {
	return newTap(body, d, contentType, gzipped, time.Now)
}

func newTap(body io.ReadCloser, d *deliveries, contentType string, gzipped bool, now func() time.Time) *tappedBody {
	chunks := make(chan stampedChunk, tapChunks)
	t := &tappedBody{ReadCloser: body, now: now, chunks: chunks, decoded: make(chan struct{})}
	go func() {
		defer close(t.decoded)
		decodeWatch(&chunkReader{chunks: chunks}, d, contentType, gzipped)
	}()
	return t
}

type stampedChunk struct {
	data []byte
	at   time.Time
}

type tappedBody struct {
	io.ReadCloser
	now func() time.Time
	// decoded is closed when the decoder has read the last chunk.
	decoded chan struct{}
	// mu guards chunks against a Read after the end: the tap closes
	// chunks once, at the stream's first error or at Close.
	mu     sync.Mutex
	chunks chan<- stampedChunk
}

func (t *tappedBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	at := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if n > 0 && t.chunks != nil {
		t.chunks <- stampedChunk{data: append([]byte(nil), p[:n]...), at: at}
	}
	if err != nil {
		t.end()
	}
	return n, err
}

func (t *tappedBody) Close() error {
	err := t.ReadCloser.Close()
	t.mu.Lock()
	t.end()
	t.mu.Unlock()
	return err
}

func (t *tappedBody) end() {
	if t.chunks != nil {
		close(t.chunks)
		t.chunks = nil
	}
}

// chunkReader reads the stamped chunks back as one stream and remembers
// the stamp of the chunk it last gave bytes from.
type chunkReader struct {
	chunks <-chan stampedChunk
	cur    stampedChunk
	last   time.Time
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur.data) == 0 {
		c, ok := <-r.chunks
		if !ok {
			return 0, io.EOF
		}
		r.cur = c
	}
	n := copy(p, r.cur.data)
	r.cur.data = r.cur.data[n:]
	r.last = r.cur.at
	return n, nil
}

// decodeWatch records the events of the stream until it ends or cannot be
// decoded; then it drains the rest so that the stream never waits on it.
// It decodes as client-go's own watch does (the serializer for the media
// type, its framer, rest/watch's Decoder). The framers read only what the
// event in hand still lacks, and gzip's reader gives an event out as soon
// as its sync flush arrives (the apiserver sync-flushes each event, then
// ends the member), so the chunk last read is the one that completed it.
func decodeWatch(r *chunkReader, d *deliveries, contentType string, gzipped bool) {
	defer func() {
		for range r.chunks {
		}
	}()
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		return
	}
	var src io.Reader = r
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return
		}
		src = zr
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(src))
	dec := restwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), scheme.Codecs.UniversalDeserializer())
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			return
		}
		if typ != watch.Added && typ != watch.Modified && typ != watch.Deleted {
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil {
			d.record(m.GetName(), rv, r.last)
		}
	}
}
