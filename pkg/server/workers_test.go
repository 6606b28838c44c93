package server

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := StartWorkers(ctx, 2)

	// Everything runs, and Do returns only once it has.
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			done := false
			w.Do(func() { ran.Add(1); done = true })
			if !done {
				t.Error("Do returned before its function did")
			}
		})
	}
	wg.Wait()
	if ran.Load() != 100 {
		t.Fatalf("ran %d of 100", ran.Load())
	}

	// With every worker busy, Do runs on the caller instead of waiting.
	release := make(chan struct{})
	var busy sync.WaitGroup
	for range 2 {
		busy.Add(1)
		started := make(chan struct{})
		go w.Do(func() { close(started); <-release; busy.Done() })
		<-started
	}
	inline := make(chan bool, 1)
	go w.Do(func() { inline <- true })
	select {
	case <-inline:
	case <-time.After(10 * time.Second):
		t.Fatal("Do waited for a busy pool")
	}
	close(release)
	busy.Wait()
}

func TestWorkersRaisePanicsInTheCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := StartWorkers(ctx, 1)
	for range 3 { // the worker survives each panic
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the function's panic", r)
				}
			}()
			w.Do(func() { panic("boom") })
			t.Fatal("Do returned after a panic")
		}()
	}
	ran := false
	w.Do(func() { ran = true })
	if !ran {
		t.Fatal("the pool stopped working after panics")
	}
}

func TestWorkersStopWithTheirContext(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	w := StartWorkers(ctx, 8)
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines left after the context ended, %d before", n, before)
	}
	ran := false
	w.Do(func() { ran = true }) // stopped workers: runs on the caller
	if !ran {
		t.Fatal("Do on a stopped pool did not run")
	}
	var nilPool *Workers
	nilPool.Do(func() { ran = false })
	if ran {
		t.Fatal("a nil pool did not run its function")
	}
}
