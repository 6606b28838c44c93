package graph

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// monitor wraps an informer's ListerWatcher so that f sees every list and
// watch it makes, and how each watch ends. A nil Freshness returns lw as
// it is.
func (f *Freshness) monitor(name string, lw cache.ListerWatcher) cache.ListerWatcher {
	if f == nil {
		return lw
	}
	return &monitoredListWatch{inner: cache.ToListerWatcherWithContext(lw), outer: lw, freshness: f, source: f.addSource(name)}
}

type monitoredListWatch struct {
	inner     cache.ListerWatcherWithContext
	outer     cache.ListerWatcher
	freshness *Freshness
	source    *source
}

// IsWatchListSemanticsUnSupported passes on what the wrapped ListerWatcher
// says about streaming lists, which the reflector asks before using them.
func (m *monitoredListWatch) IsWatchListSemanticsUnSupported() bool {
	u, ok := m.outer.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

func (m *monitoredListWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	return m.ListWithContext(context.Background(), options)
}

func (m *monitoredListWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return m.WatchWithContext(context.Background(), options)
}

func (m *monitoredListWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	obj, err := m.inner.ListWithContext(ctx, options)
	if err != nil {
		m.freshness.failed(m.source, fmt.Errorf("list: %w", err))
		return nil, err
	}
	// A paginated list is complete only with its last page.
	if list, lerr := meta.ListAccessor(obj); lerr != nil || list.GetContinue() == "" {
		m.freshness.listed(m.source)
	}
	return obj, nil
}

func (m *monitoredListWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := m.inner.WatchWithContext(ctx, options)
	if err != nil {
		m.freshness.failed(m.source, fmt.Errorf("watch: %w", err))
		return nil, err
	}
	streamsInitialState := options.SendInitialEvents != nil && *options.SendInitialEvents
	id := m.freshness.watchOpened(m.source, streamsInitialState)
	mw := &monitoredWatch{inner: w, result: make(chan watch.Event), stop: make(chan struct{})}
	go mw.forward(func(ev watch.Event) {
		switch ev.Type {
		case watch.Error:
			m.freshness.watchEnded(m.source, id, fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object)))
		case watch.Bookmark:
			if streamsInitialState && isInitialEventsEnd(ev.Object) {
				m.freshness.initialEventsDone(m.source, id)
			}
		}
	}, func() { m.freshness.watchEnded(m.source, id, errWatchClosed) })
	return mw, nil
}

// monitoredWatch passes a watch's events through, showing each to observe
// and calling ended when the stream stops.
type monitoredWatch struct {
	inner    watch.Interface
	result   chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *monitoredWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *monitoredWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

func (w *monitoredWatch) forward(observe func(watch.Event), ended func()) {
	defer close(w.result)
	defer ended()
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			observe(ev)
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
		}
	}
}

func isInitialEventsEnd(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
