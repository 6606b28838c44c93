package server

import (
	"context"
	"sync"
)

// Workers run review decisions on goroutines that live as long as the
// server. The HTTP/2 server runs every request on a new goroutine whose
// stack starts small; decoding and deciding a review grows it, and the
// runtime copies the stack and rewrites every frame on the way, which cost
// a fifth of /validate's handler. A worker's stack grows once and stays
// grown. (grpc-go's NumStreamWorkers exists for the same reason.)
//
// Workers add no queue: a decision runs on an idle worker, or on the
// caller's goroutine when none is idle, so a busy pool never delays a
// request; limiting what runs at once is LimitInFlight's job. Size a pool
// to the requests allowed in flight.
type Workers struct {
	jobs chan *job
	pool sync.Pool
}

// job is one decision handed to a worker; done carries a recovered panic,
// or nil.
type job struct {
	run  func()
	done chan any
}

// StartWorkers starts n workers, which stop when ctx ends. n < 1 gives a
// nil *Workers, which runs everything on the caller's goroutine.
func StartWorkers(ctx context.Context, n int) *Workers {
	if n < 1 {
		return nil
	}
	w := &Workers{jobs: make(chan *job)}
	w.pool.New = func() any { return &job{done: make(chan any, 1)} }
	for range n {
		go w.work(ctx)
	}
	return w
}

func (w *Workers) work(ctx context.Context) {
	for {
		select {
		case j := <-w.jobs:
			j.done <- runRecovered(j.run)
		case <-ctx.Done():
			return
		}
	}
}

// runRecovered runs f and returns what it panicked with, if it did: a
// panic must reach the request's goroutine, where the handler's recovery
// answers it, instead of ending the process from a worker.
func runRecovered(f func()) (panicked any) {
	defer func() { panicked = recover() }()
	f()
	return nil
}

// Do runs f on an idle worker, or on the calling goroutine when none is
// idle, and returns when f has; a panic in f is raised again in the
// caller.
func (w *Workers) Do(f func()) {
	if w == nil {
		f()
		return
	}
	j := w.pool.Get().(*job)
	j.run = f
	select {
	case w.jobs <- j:
		p := <-j.done
		j.run = nil
		w.pool.Put(j)
		if p != nil {
			panic(p)
		}
	default:
		j.run = nil
		w.pool.Put(j)
		f()
	}
}
